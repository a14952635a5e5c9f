"""Local Redis topologies for asyncq's own deployment tests and benchmarks: a Redis Cluster,
Sentinel-managed masters, TLS servers and ACL users, each built from real ``redis-server``
processes (see ``asyncq._testing.redis_server``). Not shipped in the wheel."""
