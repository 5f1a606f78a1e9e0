"""The Trio broker: listener, per-connection loop, one handler per API, the segment
log, fetch serving with sendfile, the group coordinator and ZooKeeper registration.

May import: protocol, trio, kazoo.
"""
