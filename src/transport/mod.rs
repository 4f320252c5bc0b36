//! The HTTPS transport: answers the engine's [`WebhookCall`](crate::engine::call::WebhookCall)s
//! over real TLS connections, the way kube-apiserver's webhook client does (credentials from the
//! webhook kubeconfig, `caBundle` trust, server-name verification, HTTP/2 only for loopback URL
//! webhooks, `kube-apiserver-admission` user agent, 30 s client timeout, 10 s TLS handshake timeout,
//! gzip asked for and decoded), and reports failures in Go's wording.

mod auth;
mod client;
mod errors;
mod h1;
mod pem;
mod record;
mod redirect;

pub use auth::{AuthError, Credentials, Impersonation, WebhookAuth};
pub use client::{CLIENT_TIMEOUT, HttpsOptions, HttpsReplier, USER_AGENT_VALUE};
