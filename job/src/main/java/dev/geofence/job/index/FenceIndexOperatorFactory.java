package dev.geofence.job.index;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.job.hold.HoldCoordinator;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.operators.coordination.OperatorCoordinator;
import org.apache.flink.streaming.api.operators.CoordinatedOperatorFactory;
import org.apache.flink.streaming.api.operators.SimpleOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperatorFactory;

/**
 * Makes the fence index operator with its coordinator ({@link HoldCoordinator}), and hands each
 * subtask the gateway through which it says when its hold of locations is full.
 */
public final class FenceIndexOperatorFactory extends SimpleOperatorFactory<GeofenceTrigger>
    implements TwoInputStreamOperatorFactory<FenceChange, Location, GeofenceTrigger>, CoordinatedOperatorFactory<GeofenceTrigger> {

  private static final long serialVersionUID = 1L;

  private final String holdToken;

  /** @param holdToken the token the job's gated location source has too */
  public FenceIndexOperatorFactory(FenceIndexOperator operator, String holdToken) {
    super(operator);
    this.holdToken = holdToken;
  }

  @Override
  public <T extends StreamOperator<GeofenceTrigger>> T createStreamOperator(StreamOperatorParameters<GeofenceTrigger> parameters) {
    T operator = super.createStreamOperator(parameters);
    ((FenceIndexOperator) operator).reportHoldTo(
        parameters.getOperatorEventDispatcher().getOperatorEventGateway(parameters.getStreamConfig().getOperatorID()));
    return operator;
  }

  @Override
  public OperatorCoordinator.Provider getCoordinatorProvider(String operatorName, OperatorID operatorID) {
    return new HoldCoordinator.Provider(operatorID, holdToken);
  }
}
