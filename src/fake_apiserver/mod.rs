//! A Kubernetes API server on loopback that speaks the real wire protocol (list, watch, `/metrics`), for tests, benchmarks and demos.
