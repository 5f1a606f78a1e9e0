"""Consumer group membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed offsets and
the assignors that run in the group leader."""
