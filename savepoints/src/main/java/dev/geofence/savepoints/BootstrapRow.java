package dev.geofence.savepoints;

import dev.geofence.connectors.cdc.FenceChange;

/**
 * One record a bootstrap writes into the fence index's state: a change as the operator would apply
 * it (a fence, a bucket fingerprint, a key group's stream position), and for a fence imported from
 * a snapshot file, the objects inside it and since when. A Flink POJO.
 */
public class BootstrapRow {

  public FenceChange change;
  public String[] memberIds;
  public long[] memberSince;

  public BootstrapRow() {}

  BootstrapRow(FenceChange change) {
    this.change = change;
  }
}
