//! The API errors a client can receive from the admission chain, built exactly as apimachinery's
//! `k8s.io/apimachinery/pkg/api/errors` constructors build them, and the Go formatting helpers
//! their messages need.

use crate::api::{GroupResource, Status, StatusCause, StatusDetails};
pub use crate::gofmt::{push_json_string as go_json_string, quote as go_quote};

/// `apierrors.NewInternalError(err)`: 500, reason `InternalError`.
pub fn internal_error(err: &str) -> Status {
    Status {
        status: "Failure".into(),
        code: 500,
        reason: "InternalError".into(),
        details: Some(StatusDetails {
            causes: vec![StatusCause {
                message: err.into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        message: format!("Internal error occurred: {err}"),
    }
}

/// `apierrors.NewBadRequest(reason)`: 400, reason `BadRequest`.
pub fn bad_request(message: &str) -> Status {
    Status {
        status: "Failure".into(),
        code: 400,
        reason: "BadRequest".into(),
        details: None,
        message: message.into(),
    }
}

/// `apierrors.NewServiceUnavailable(reason)`: 503, reason `ServiceUnavailable`.
pub fn service_unavailable(message: &str) -> Status {
    Status {
        status: "Failure".into(),
        code: 503,
        reason: "ServiceUnavailable".into(),
        details: None,
        message: message.into(),
    }
}

/// `apierrors.NewTimeoutError(message, 0)`: 504, reason `Timeout`.
pub fn timeout_error(message: &str) -> Status {
    Status {
        status: "Failure".into(),
        code: 504,
        reason: "Timeout".into(),
        details: Some(StatusDetails::default()),
        message: format!("Timeout: {message}"),
    }
}

/// `apierrors.NewForbidden(resource, name, err)`: 403, reason `Forbidden`.
pub fn forbidden(resource: &GroupResource, name: &str, err: &str) -> Status {
    let message = if resource.group.is_empty() && resource.resource.is_empty() {
        format!("forbidden: {err}")
    } else if name.is_empty() {
        format!("{resource} is forbidden: {err}")
    } else {
        format!("{resource} {} is forbidden: {err}", go_quote(name))
    };
    Status {
        status: "Failure".into(),
        code: 403,
        reason: "Forbidden".into(),
        details: Some(StatusDetails {
            name: name.into(),
            group: resource.group.clone(),
            kind: resource.resource.clone(),
            ..Default::default()
        }),
        message,
    }
}

/// `apierrors.NewNotFound(resource, name)`: 404, reason `NotFound`.
pub fn not_found(resource: &GroupResource, name: &str) -> Status {
    Status {
        status: "Failure".into(),
        code: 404,
        reason: "NotFound".into(),
        details: Some(StatusDetails {
            name: name.into(),
            group: resource.group.clone(),
            kind: resource.resource.clone(),
            ..Default::default()
        }),
        message: format!("{resource} {} not found", go_quote(name)),
    }
}

/// `webhookerrors.ToStatusErr`: the Status a client gets when a webhook denies a request.
pub fn to_status_err(webhook: &str, result: Option<&Status>) -> Status {
    let denied_by = format!("admission webhook {} denied the request", go_quote(webhook));
    let mut status = result.cloned().unwrap_or_else(|| Status {
        status: "Failure".into(),
        ..Default::default()
    });
    if status.code < 400 {
        status.code = 400;
    }
    if status.status.is_empty() || status.status == "Success" {
        status.status = "Failure".into();
    }
    status.message = if !status.message.is_empty() {
        format!("{denied_by}: {}", status.message)
    } else if !status.reason.is_empty() {
        format!("{denied_by}: {}", status.reason)
    } else {
        format!("{denied_by} without explanation")
    };
    status
}

/// `apierrors.NewGenericServerResponse` as client-go builds it for a webhook answer outside
/// 200–206 whose body is not a failure `Status` (no resource, verb POST).
pub fn generic_server_response(code: u16, server_message: &str) -> Status {
    let (reason, message) = match code {
        409 => ("Conflict", "the server reported a conflict".to_string()),
        404 => ("NotFound", "the server could not find the requested resource".to_string()),
        400 => ("BadRequest", "the server rejected our request for an unknown reason".to_string()),
        401 => ("Unauthorized", "the server has asked for the client to provide credentials".to_string()),
        403 => ("Forbidden", server_message.to_string()),
        406 => (
            "NotAcceptable",
            if server_message.is_empty() || server_message == "unknown" {
                "the server was unable to respond with a content type that the client supports".to_string()
            } else {
                server_message.to_string()
            },
        ),
        415 => (
            "UnsupportedMediaType",
            if server_message.is_empty() || server_message == "unknown" {
                "the server was unable to respond with a content type that the client supports".to_string()
            } else {
                server_message.to_string()
            },
        ),
        405 => ("MethodNotAllowed", "the server does not allow this method on the requested resource".to_string()),
        422 => ("Invalid", "the server rejected our request due to an error in our request".to_string()),
        503 => ("ServiceUnavailable", "the server is currently unable to handle the request".to_string()),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted, but may still be processing the request"
                .to_string(),
        ),
        429 => (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later".to_string(),
        ),
        c if c >= 500 => (
            "InternalError",
            format!("an error on the server ({}) has prevented the request from succeeding", go_quote(server_message)),
        ),
        c => ("", format!("the server responded with the status code {c} but did not return more information")),
    };
    Status {
        status: "Failure".into(),
        code: i32::from(code),
        reason: reason.into(),
        details: Some(StatusDetails {
            causes: vec![StatusCause {
                cause_type: "UnexpectedServerResponse".into(),
                message: server_message.into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        message,
    }
}

/// Go's `time.Duration.String()` for a whole number of seconds (`10s`, `1m0s`, `1h0m0s`).
pub fn go_duration_secs(secs: u64) -> String {
    if secs == 0 {
        return "0s".into();
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_status_err_follows_upstream_rules() {
        let s = to_status_err("foo", None);
        assert_eq!(
            s.message,
            "admission webhook \"foo\" denied the request without explanation"
        );
        assert_eq!((s.code, s.status.as_str()), (400, "Failure"));
        let given = Status {
            code: 200,
            status: "Success".into(),
            reason: "r".into(),
            ..Default::default()
        };
        let s = to_status_err("foo", Some(&given));
        assert_eq!(s.message, "admission webhook \"foo\" denied the request: r");
        assert_eq!((s.code, s.status.as_str()), (400, "Failure"));
    }

    #[test]
    fn go_helpers_match_go_output() {
        assert_eq!(go_quote("a\"b\n"), "\"a\\\"b\\n\"");
        let mut s = String::new();
        go_json_string(&mut s, "<a&b>");
        assert_eq!(s, "\"\\u003ca\\u0026b\\u003e\"");
        assert_eq!(go_duration_secs(10), "10s");
        assert_eq!(go_duration_secs(60), "1m0s");
        assert_eq!(go_duration_secs(3601), "1h0m1s");
        assert_eq!(
            forbidden(
                &GroupResource {
                    group: "".into(),
                    resource: "pods".into()
                },
                "p",
                "x"
            )
            .message,
            "pods \"p\" is forbidden: x"
        );
    }
}
