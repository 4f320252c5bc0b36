//! Failures phrased as Go's net/http, net and crypto/tls phrase them.

use crate::gofmt::quote as go_quote;
use std::error::Error as StdError;
use std::io;
use std::net::{IpAddr, SocketAddr};

use rustls::{AlertDescription, CertificateError};

use crate::engine::call::{TransportError, TransportErrorKind};

pub(crate) fn transport(kind: TransportErrorKind, detail: impl Into<String>) -> TransportError {
    TransportError {
        kind,
        detail: detail.into(),
    }
}

/// The lower-case `strerror` text Go prints for a system error.
pub(crate) fn errno_text(e: &io::Error) -> String {
    let known = match e.raw_os_error() {
        Some(2) => Some("no such file or directory"),
        Some(13) => Some("permission denied"),
        Some(21) => Some("is a directory"),
        Some(32) => Some("broken pipe"),
        Some(101) => Some("network is unreachable"),
        Some(103) => Some("software caused connection abort"),
        Some(104) => Some("connection reset by peer"),
        Some(110) => Some("connection timed out"),
        Some(111) => Some("connection refused"),
        Some(113) => Some("no route to host"),
        _ => None,
    };
    if let Some(text) = known {
        return text.to_string();
    }
    let fallback = match e.kind() {
        io::ErrorKind::NotFound => "no such file or directory",
        io::ErrorKind::PermissionDenied => "permission denied",
        io::ErrorKind::ConnectionRefused => "connection refused",
        io::ErrorKind::ConnectionReset => "connection reset by peer",
        io::ErrorKind::ConnectionAborted => "software caused connection abort",
        io::ErrorKind::BrokenPipe => "broken pipe",
        io::ErrorKind::HostUnreachable => "no route to host",
        io::ErrorKind::NetworkUnreachable => "network is unreachable",
        io::ErrorKind::TimedOut => "connection timed out",
        io::ErrorKind::UnexpectedEof => return "EOF".to_string(),
        _ => "",
    };
    if !fallback.is_empty() {
        return fallback.to_string();
    }
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text.to_string(),
    }
}

/// Go renders a socket address `1.2.3.4:5` / `[::1]:5`, as Rust does.
pub(crate) fn dial_error(addr: SocketAddr, e: &io::Error) -> TransportError {
    let kind = match e.kind() {
        io::ErrorKind::TimedOut => TransportErrorKind::Timeout,
        _ => TransportErrorKind::Connect,
    };
    transport(kind, format!("dial tcp {addr}: connect: {}", errno_text(e)))
}

pub(crate) fn lookup_error(host: &str) -> TransportError {
    transport(
        TransportErrorKind::Dns,
        format!("dial tcp: lookup {host}: no such host"),
    )
}

/// The endpoints of an established connection, for Go's `read tcp a->b: …` texts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnAddrs {
    pub local: Option<SocketAddr>,
    pub remote: SocketAddr,
}

impl ConnAddrs {
    fn op(&self, op: &str, e: &io::Error) -> String {
        match self.local {
            Some(local) => format!("{op} tcp {local}->{}: {op}: {}", self.remote, errno_text(e)),
            None => format!("{op} tcp {}: {op}: {}", self.remote, errno_text(e)),
        }
    }
}

fn alert_text(alert: &AlertDescription) -> String {
    let text = match alert {
        AlertDescription::CloseNotify => "close notify",
        AlertDescription::UnexpectedMessage => "unexpected message",
        AlertDescription::BadRecordMac => "bad record MAC",
        AlertDescription::RecordOverflow => "record overflow",
        AlertDescription::HandshakeFailure => "handshake failure",
        AlertDescription::BadCertificate => "bad certificate",
        AlertDescription::UnsupportedCertificate => "unsupported certificate",
        AlertDescription::CertificateRevoked => "revoked certificate",
        AlertDescription::CertificateExpired => "expired certificate",
        AlertDescription::CertificateUnknown => "unknown certificate",
        AlertDescription::IllegalParameter => "illegal parameter",
        AlertDescription::UnknownCA => "unknown certificate authority",
        AlertDescription::AccessDenied => "access denied",
        AlertDescription::DecodeError => "error decoding message",
        AlertDescription::DecryptError => "error decrypting message",
        AlertDescription::ProtocolVersion => "protocol version not supported",
        AlertDescription::InsufficientSecurity => "insufficient security level",
        AlertDescription::InternalError => "internal error",
        AlertDescription::InappropriateFallback => "inappropriate fallback",
        AlertDescription::UserCanceled => "user canceled",
        AlertDescription::MissingExtension => "missing extension",
        AlertDescription::UnsupportedExtension => "unsupported extension",
        AlertDescription::UnrecognisedName => "unrecognized name",
        AlertDescription::BadCertificateStatusResponse => "bad certificate status response",
        AlertDescription::UnknownPSKIdentity => "unknown PSK identity",
        AlertDescription::CertificateRequired => "certificate required",
        AlertDescription::NoApplicationProtocol => "no application protocol",
        other => return format!("alert({})", u8::from(*other)),
    };
    text.to_string()
}

fn go_time(t: rustls_pki_types::UnixTime) -> String {
    let secs = t.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant), enough for RFC 3339 in UTC.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn presented_names(presented: &[String], want_ip: bool) -> Vec<String> {
    presented
        .iter()
        .filter_map(|p| {
            if let Some(dns) = p
                .strip_prefix("DnsName(\"")
                .and_then(|s| s.strip_suffix("\")"))
            {
                (!want_ip).then(|| dns.to_string())
            } else if let Some(ip) = p
                .strip_prefix("IpAddress(")
                .and_then(|s| s.strip_suffix(')'))
            {
                want_ip.then(|| {
                    ip.parse::<IpAddr>()
                        .map_or_else(|_| ip.to_string(), |a| a.to_string())
                })
            } else {
                None
            }
        })
        .collect()
}

fn certificate_text(e: &CertificateError) -> String {
    let x509 = match e {
        CertificateError::UnknownIssuer | CertificateError::BadSignature => {
            "x509: certificate signed by unknown authority".to_string()
        }
        CertificateError::ExpiredContext { time, not_after } => format!(
            "x509: certificate has expired or is not yet valid: current time {} is after {}",
            go_time(*time),
            go_time(*not_after)
        ),
        CertificateError::NotValidYetContext { time, not_before } => format!(
            "x509: certificate has expired or is not yet valid: current time {} is before {}",
            go_time(*time),
            go_time(*not_before)
        ),
        CertificateError::Expired | CertificateError::NotValidYet => {
            "x509: certificate has expired or is not yet valid".to_string()
        }
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => {
            let host = expected.to_str();
            let want_ip = host.parse::<IpAddr>().is_ok();
            let valid = presented_names(presented, want_ip);
            if want_ip && valid.is_empty() {
                format!(
                    "x509: cannot validate certificate for {host} because it doesn't contain any IP SANs"
                )
            } else if valid.is_empty() {
                format!("x509: certificate is not valid for any names, but wanted to match {host}")
            } else {
                format!(
                    "x509: certificate is valid for {}, not {host}",
                    valid.join(", ")
                )
            }
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "x509: certificate specifies an incompatible key usage".to_string()
        }
        CertificateError::BadEncoding => "x509: malformed certificate".to_string(),
        other => format!("x509: {other}"),
    };
    format!("tls: failed to verify certificate: {x509}")
}

/// Go's text for a TLS failure reported by rustls.
pub(crate) fn rustls_text(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(c) => certificate_text(c),
        rustls::Error::AlertReceived(alert) => format!("remote error: tls: {}", alert_text(alert)),
        rustls::Error::NoApplicationProtocol => {
            "tls: server selected unadvertised ALPN protocol".to_string()
        }
        rustls::Error::PeerIncompatible(_) | rustls::Error::PeerMisbehaved(_) => {
            format!("tls: {e}")
        }
        rustls::Error::InvalidMessage(_) => {
            "tls: first record does not look like a TLS handshake".to_string()
        }
        other => format!("tls: {other}"),
    }
}

/// Phase of an exchange, which decides Go's wording for timeouts and body errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Connecting,
    AwaitingHeaders,
    ReadingBody,
}

/// The request ran out of time. `client_timeout` is true when the HTTP client's own 30 s limit
/// (not a shorter call deadline) expired.
pub(crate) fn timeout_error(phase: Phase, client_timeout: bool) -> TransportError {
    let detail = match (phase, client_timeout) {
        (Phase::ReadingBody, false) => body_error("context deadline exceeded"),
        (Phase::ReadingBody, true) => body_error(
            "context deadline exceeded (Client.Timeout or context cancellation while reading body)",
        ),
        (_, false) => "context deadline exceeded".to_string(),
        (_, true) => {
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".to_string()
        }
    };
    transport(TransportErrorKind::Timeout, detail)
}

/// client-go's wrapping of errors while reading a response body.
pub(crate) fn body_error(cause: &str) -> String {
    format!("unexpected error when reading response body. Please retry. Original error: {cause}")
}

/// A TLS record cut short by the end of the stream: Go's `crypto/tls` reads it as
/// `io.ErrUnexpectedEOF`.
#[derive(Debug)]
struct TruncatedRecord;

impl std::fmt::Display for TruncatedRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("unexpected EOF")
    }
}

impl StdError for TruncatedRecord {}

/// The error for a stream that ended inside a TLS record.
pub(crate) fn truncated_record() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, TruncatedRecord)
}

/// Whether rustls reports the peer's close without `close_notify` (an end of stream that is not
/// a TLS failure of its own).
pub(crate) fn unclean_close(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::UnexpectedEof
        && e.get_ref()
            .is_none_or(|inner| !inner.is::<rustls::Error>() && !inner.is::<TruncatedRecord>())
}

/// Maps an IO error on an established (TLS) connection.
pub(crate) fn io_error(addrs: &ConnAddrs, e: &io::Error, writing: bool) -> TransportError {
    if let Some(inner) = e.get_ref() {
        if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
            return transport(TransportErrorKind::Tls, rustls_text(tls));
        }
        if inner.is::<TruncatedRecord>() {
            return transport(TransportErrorKind::Reset, "unexpected EOF");
        }
    }
    match e.kind() {
        io::ErrorKind::UnexpectedEof => transport(TransportErrorKind::Reset, "EOF"),
        io::ErrorKind::TimedOut => transport(TransportErrorKind::Timeout, addrs.op("read", e)),
        _ => {
            let op = if writing { "write" } else { "read" };
            transport(TransportErrorKind::Reset, addrs.op(op, e))
        }
    }
}

/// A failure that broke an HTTP/1.x connection, as Go's `mapRoundTripError` wraps it.
pub(crate) fn broken(kind: TransportErrorKind, cause: impl std::fmt::Display) -> TransportError {
    transport(
        kind,
        format!("net/http: HTTP/1.x transport connection broken: {cause}"),
    )
}

/// An answer larger than the replier accepts (client-go has no limit: a safety bound).
pub(crate) fn body_too_large(limit: usize) -> TransportError {
    transport(
        TransportErrorKind::Other,
        format!("response body exceeds hookscope's limit of {limit} bytes"),
    )
}

/// What Go's `http.ReadResponse` finds wrong with the status line at the start of `head`. A line
/// not yet ended is judged only `at_eof`, when Go's `textproto` returns it as the last line.
fn status_line_fault(head: &[u8], at_eof: bool) -> Option<String> {
    let line = match head.iter().position(|&b| b == b'\n') {
        Some(nl) => &head[..nl],
        None if at_eof && !head.is_empty() => head,
        None => return None,
    };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let fault = first_line_error(&String::from_utf8_lossy(line));
    (!fault.is_empty()).then_some(fault)
}

/// Go's `http.ReadResponse` complaint about the first bytes of a response that could not be
/// parsed: the status line's fault, else the first header line `textproto` refuses.
pub(crate) fn malformed_response(head: &[u8]) -> TransportError {
    if head.is_empty() {
        return transport(TransportErrorKind::Reset, "EOF");
    }
    let cause = status_line_fault(head, true).or_else(|| mime_header_fault(head, false));
    broken(
        TransportErrorKind::Malformed,
        cause.as_deref().unwrap_or("malformed MIME header line"),
    )
}

/// Go's complaint about a response head cut short by the end of the stream: the status line's
/// fault if it has one, else that of a header line (the last one, unended, counts as a line, as
/// `bufio.Reader.ReadLine` returns it at the end of the stream), else `unexpected EOF`.
pub(crate) fn truncated_head(head: &[u8]) -> TransportError {
    match status_line_fault(head, true).or_else(|| mime_header_fault(head, true)) {
        Some(fault) => broken(TransportErrorKind::Malformed, fault),
        None => broken(TransportErrorKind::Reset, "unexpected EOF"),
    }
}

/// What Go's `textproto.Reader.ReadMIMEHeader` refuses in the header lines of `head` (after its
/// status line, up to the empty line that ends them); a last line without its `\n` is read as a
/// line only `at_eof`.
fn mime_header_fault(head: &[u8], at_eof: bool) -> Option<String> {
    let start = head.iter().position(|&b| b == b'\n')? + 1;
    let mut rest = &head[start..];
    let mut first = true;
    while !rest.is_empty() {
        let (line, next) = match rest.iter().position(|&b| b == b'\n') {
            Some(nl) => (&rest[..nl], &rest[nl + 1..]),
            None if at_eof => (rest, &rest[rest.len()..]),
            None => return None,
        };
        rest = next;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return None;
        }
        let text = String::from_utf8_lossy(line);
        let continued = matches!(line[0], b' ' | b'\t');
        if first && continued {
            return Some(format!("malformed MIME header initial line: {text}"));
        }
        first = false;
        if continued {
            continue;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Some(format!(
                "malformed MIME header: missing colon: {}",
                go_quote(&text)
            ));
        };
        let (key, value) = (&line[..colon], &line[colon + 1..]);
        let key_ok = !key.is_empty() && key.iter().all(|&b| b == b' ' || is_token_byte(b));
        let value_ok = value.iter().all(|&b| b == b'\t' || b >= 0x20 && b != 0x7f);
        if !key_ok || !value_ok {
            let trimmed = text.trim_matches([' ', '\t']);
            return Some(format!("malformed MIME header line: {trimmed}"));
        }
    }
    None
}

/// A byte of an HTTP token (RFC 7230 `tchar`).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The status line's fault once the line is complete: Go checks it before reading on.
pub(crate) fn status_line_error(head: &[u8]) -> Option<TransportError> {
    status_line_fault(head, false).map(|fault| broken(TransportErrorKind::Malformed, fault))
}

/// The status-line checks of Go's `http.ReadResponse`; empty when the line is acceptable.
fn first_line_error(line: &str) -> String {
    let Some((proto, status)) = line.split_once(' ') else {
        return format!("malformed HTTP response {}", go_quote(line));
    };
    let status = status.trim_start_matches(' ');
    let code = status.split(' ').next().unwrap_or_default();
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return format!("malformed HTTP status code {}", go_quote(code));
    }
    let version_ok = proto
        .strip_prefix("HTTP/")
        .and_then(|v| v.split_once('.'))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        });
    if !version_ok {
        return format!("malformed HTTP version {}", go_quote(proto));
    }
    String::new()
}

/// Walks an error's sources for an IO error.
pub(crate) fn find_io<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a io::Error> {
    let mut cur: Option<&'a (dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return Some(io);
        }
        cur = err.source();
    }
    None
}
