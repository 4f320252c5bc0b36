//! The cluster connection: kubeconfig, watched webhook configurations, `/metrics` scrapes.
