/**
 * The fence index's state layout, which the job and the savepoint tools share: the operators'
 * uids, the state descriptors, keys, stored types and their versioned serializers, and the reading
 * of a savepoint's files. The package keeps the name it had when the operator itself lived here:
 * savepoints name the serializers' snapshots by class, so these classes never move (the operator
 * is in {@code dev.geofence.job.index}).
 */
package dev.geofence.job.operator;
