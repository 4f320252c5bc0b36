//! Audit events from a live cluster: a followed audit log, or the apiserver's audit webhook backend.
