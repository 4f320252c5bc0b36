//! Loaders for captured requests: AdmissionReview documents and audit.k8s.io/v1 audit logs.
//! (Being written: see the replay issue.)
