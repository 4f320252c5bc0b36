//! Turning errors into a plain reason, what to do about it, and (for 403) the RBAC rule needed.

use std::fmt;
use std::time::Duration;

use super::{ClusterError, Feed};

/// The class of a failure, for the console to pick a colour or an icon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No kubeconfig, an unreadable one, or an unknown context.
    Kubeconfig,
    /// The server could not be reached (refused, timed out, name not resolved, connection lost).
    Unreachable,
    /// The TLS handshake failed (untrusted or mismatched server certificate).
    Tls,
    /// 401: the credentials were rejected, or the credential plugin failed.
    Unauthorized,
    /// 403: the user lacks an RBAC permission ([`Failure::rbac`] says which).
    Forbidden,
    /// The server answered with another error (5xx, 404, …).
    Server,
}

/// The RBAC rule a 403 calls for, and how to check it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacAdvice {
    /// The ClusterRole rule granting it, as YAML (one list item).
    pub rule: String,
    /// The `kubectl auth can-i …` command that checks it.
    pub check: String,
}

/// Something went wrong: what, what to do, and when hookscope tries again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The class of failure.
    pub kind: FailureKind,
    /// What happened, in plain words (the server's message included).
    pub reason: String,
    /// What the user can do about it.
    pub action: String,
    /// For [`FailureKind::Forbidden`]: the missing permission.
    pub rbac: Option<RbacAdvice>,
    /// How long until the next attempt.
    pub retry_in: Duration,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.reason, self.action)?;
        if let Some(rbac) = &self.rbac {
            write!(f, " Rule:\n{}\nCheck: {}", rbac.rule, rbac.check)?;
        }
        // A one-off request (an apply) is not retried.
        if self.retry_in.is_zero() {
            return Ok(());
        }
        write!(f, " (retrying in {:.1?})", self.retry_in)
    }
}

/// The text of an error and all its sources, joined by ": " (duplicates skipped).
pub(crate) fn chain_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = Some(error);
    while let Some(e) = current {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
}

fn io_kind(error: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        current = e.source();
    }
    None
}

/// Whether the error is about reaching the server (as opposed to an answer from it).
pub(crate) fn is_transport(error: &kube::Error) -> bool {
    matches!(
        error,
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::RustlsTls(_)
    )
}

/// The 401/403/… status code of an API error, if it is one.
pub(crate) fn api_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Where a request was going and who sent it, for messages.
pub(crate) struct Target<'a> {
    pub(crate) server: &'a str,
    pub(crate) context: &'a str,
    pub(crate) user: &'a str,
}

impl Target<'_> {
    fn context_flag(&self) -> String {
        if self.context.is_empty() {
            String::new()
        } else {
            format!(" --context {}", self.context)
        }
    }
}

/// Describes a failed request `what` (e.g. "listing mutatingwebhookconfigurations").
/// Whether an error's text (lower case) is a TLS problem rather than a connection lost: a
/// certificate the kubeconfig does not trust, or a handshake the server refused; a handshake cut
/// off because the server went away (end of file, reset, closed) is the server being unreachable.
fn is_tls_problem(lower: &str) -> bool {
    let cut_off = [
        "eof",
        "reset",
        "closed",
        "broken pipe",
        "refused",
        "aborted",
    ]
    .iter()
    .any(|w| lower.contains(w));
    lower.contains("certificate")
        || lower.contains("unknownissuer")
        || (lower.contains("handshake") && !cut_off)
}

pub(crate) fn describe(
    error: &kube::Error,
    what: &str,
    target: &Target<'_>,
    retry_in: Duration,
) -> Failure {
    let (kind, reason, action) = match error {
        kube::Error::Api(status) => match status.code {
            401 => (
                FailureKind::Unauthorized,
                format!(
                    "{} rejected the credentials of user {:?} while {what} (401 Unauthorized).",
                    target.server, target.user
                ),
                format!(
                    "The token or client certificate in the kubeconfig is missing, expired or revoked: log in again (refresh the credentials your provider issues), then check with `kubectl{} get --raw /version`.",
                    target.context_flag()
                ),
            ),
            403 => (
                FailureKind::Forbidden,
                format!("Forbidden while {what}: {}", status.message),
                "Ask a cluster administrator to bind the user to a ClusterRole with the rule below (see the read-only ClusterRole in the documentation).".to_string(),
            ),
            code => (
                FailureKind::Server,
                format!(
                    "{} answered {code} {} while {what}: {}",
                    target.server, status.reason, status.message
                ),
                if code >= 500 {
                    "The API server is unhealthy or overloaded; check its health (`kubectl get --raw /readyz?verbose`).".to_string()
                } else {
                    "The API server refused the request; check that it serves admissionregistration.k8s.io/v1 (Kubernetes 1.16 or later).".to_string()
                },
            ),
        },
        kube::Error::Auth(e) => (
            FailureKind::Unauthorized,
            format!(
                "Getting credentials for user {:?} failed: {}",
                target.user,
                chain_text(e)
            ),
            "Run the kubeconfig's credential plugin or login command yourself and fix what it reports.".to_string(),
        ),
        other => {
            let text = chain_text(other);
            let lower = text.to_lowercase();
            if is_tls_problem(&lower) {
                (
                    FailureKind::Tls,
                    format!("TLS with {} failed while {what}: {text}", target.server),
                    "The server's certificate is not trusted by the kubeconfig's certificate-authority data, or does not name this address: check that the kubeconfig belongs to this cluster.".to_string(),
                )
            } else {
                let cause = match io_kind(other) {
                    Some(std::io::ErrorKind::ConnectionRefused) => "connection refused".to_string(),
                    Some(std::io::ErrorKind::TimedOut) => "timed out".to_string(),
                    _ => text,
                };
                (
                    FailureKind::Unreachable,
                    format!("Cannot reach {} while {what}: {cause}", target.server),
                    "Check that the cluster is running and reachable from here (VPN, proxy, port-forward, the server address in the kubeconfig); hookscope keeps retrying.".to_string(),
                )
            }
        }
    };
    Failure {
        kind,
        reason,
        action,
        rbac: None,
        retry_in,
    }
}

/// The RBAC rule for `verb` on `feed`, and the `kubectl auth can-i` check.
pub(crate) fn rbac_for(feed: Feed, verb: &str, target: &Target<'_>) -> RbacAdvice {
    match feed.resource() {
        Some(resource) => rbac_for_resource(resource, feed.group(), verb, target),
        None => RbacAdvice {
            rule: "- nonResourceURLs: [\"/metrics\"]\n  verbs: [\"get\"]".to_string(),
            check: format!("kubectl auth can-i get /metrics{}", target.context_flag()),
        },
    }
}

/// The RBAC advice for `verb` on `resource` of `group`: the read-only rule, and its check.
pub(crate) fn rbac_for_resource(
    resource: &str,
    group: &str,
    verb: &str,
    target: &Target<'_>,
) -> RbacAdvice {
    let qualified = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    RbacAdvice {
        rule: format!(
            "- apiGroups: [\"{group}\"]\n  resources: [\"{resource}\"]\n  verbs: [\"get\", \"list\", \"watch\"]"
        ),
        check: format!(
            "kubectl auth can-i {verb} {qualified}{}",
            target.context_flag()
        ),
    }
}

impl ClusterError {
    /// This error as a [`Failure`] with the given retry delay.
    pub fn to_failure(&self, retry_in: Duration) -> Failure {
        let (reason, action) = match self {
            ClusterError::NoKubeconfig { looked_at } => (
                self.to_string(),
                format!(
                    "Pass --kubeconfig FILE, set KUBECONFIG, or create {}.",
                    looked_at
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "~/.kube/config".to_string())
                ),
            ),
            ClusterError::KubeconfigRead { .. } => (
                self.to_string(),
                "Check the path given by --kubeconfig or KUBECONFIG, and that the file is a valid kubeconfig (`kubectl config view`).".to_string(),
            ),
            ClusterError::NoContext => (
                self.to_string(),
                "Pass --context NAME or select one with `kubectl config use-context NAME`.".to_string(),
            ),
            ClusterError::UnknownContext { available, .. } => (
                self.to_string(),
                if available.is_empty() {
                    "The kubeconfig defines no contexts.".to_string()
                } else {
                    format!("Pick one of: {}.", available.join(", "))
                },
            ),
            ClusterError::InCluster(_) => (
                self.to_string(),
                "Pass --kubeconfig FILE or set KUBECONFIG.".to_string(),
            ),
            ClusterError::Config(_) => (
                self.to_string(),
                "Fix the cluster or user entry of the kubeconfig (`kubectl config view`).".to_string(),
            ),
            ClusterError::Client(e) | ClusterError::Request(e) => {
                let text = chain_text(e);
                (
                    format!("Cannot set up the client: {text}"),
                    "Check the kubeconfig's server URL and certificates.".to_string(),
                )
            }
        };
        Failure {
            kind: FailureKind::Kubeconfig,
            reason,
            action,
            rbac: None,
            retry_in,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_tls_problem;

    #[test]
    fn a_handshake_cut_off_is_a_server_gone_not_a_tls_problem() {
        assert!(is_tls_problem("invalid peer certificate: unknownissuer"));
        assert!(is_tls_problem("received fatal alert: handshakefailure"));
        assert!(!is_tls_problem("tls handshake eof"));
        assert!(!is_tls_problem(
            "connection reset by peer (os error 104) during handshake"
        ));
        assert!(!is_tls_problem("tcp connect error: connection refused"));
    }
}
