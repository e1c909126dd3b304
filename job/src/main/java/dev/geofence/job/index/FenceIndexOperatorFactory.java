package dev.geofence.job.index;

import dev.geofence.connectors.cdc.FenceSourceOptions;
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
 * subtask the gateway through which it says when its hold of locations is full, and when it is
 * ready for the change stream.
 */
public final class FenceIndexOperatorFactory extends SimpleOperatorFactory<GeofenceTrigger>
    implements TwoInputStreamOperatorFactory<FenceChange, Location, GeofenceTrigger>, CoordinatedOperatorFactory<GeofenceTrigger> {

  private static final long serialVersionUID = 1L;

  private final String holdToken;
  private final FenceSourceOptions source;

  /**
   * @param holdToken the token the job's gated location and fence sources have too
   * @param source the source of truth, whose slot the coordinator may move, or null
   */
  public FenceIndexOperatorFactory(FenceIndexOperator operator, String holdToken, FenceSourceOptions source) {
    super(operator);
    this.holdToken = holdToken;
    this.source = source;
  }

  @Override
  public <T extends StreamOperator<GeofenceTrigger>> T createStreamOperator(StreamOperatorParameters<GeofenceTrigger> parameters) {
    T operator = super.createStreamOperator(parameters);
    OperatorID id = parameters.getStreamConfig().getOperatorID();
    ((FenceIndexOperator) operator).reportTo(parameters.getOperatorEventDispatcher().getOperatorEventGateway(id));
    parameters.getOperatorEventDispatcher().registerEventHandler(id, (FenceIndexOperator) operator);
    return operator;
  }

  @Override
  public OperatorCoordinator.Provider getCoordinatorProvider(String operatorName, OperatorID operatorID) {
    return new HoldCoordinator.Provider(operatorID, holdToken, source);
  }
}
