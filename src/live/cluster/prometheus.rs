//! The admission metrics from a Prometheus-compatible HTTP API (`--prometheus URL`:
//! Prometheus, Thanos, Mimir), where large clusters already keep them.
//!
//! At start one `GET /api/v1/query_range` over [`PrometheusOptions::history`] fills the charts
//! with what was recorded before the console started; then a `GET /api/v1/query` every scrape
//! interval adds the latest values. Both ask for the raw series of the admission families
//! ([`admission_selector`]), every label kept: the `instance` label keeps each apiserver's
//! counters apart, so resets are judged per apiserver and the charts sum them (or show one).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::BodyExt as _;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::failure::chain_text;
use super::{ClusterMsg, ClusterOptions, Failure, FailureKind, Feed, send};
use crate::live::metrics::{AdmissionFamily, AdmissionSnapshot};

/// Points a range query asks for at most (Prometheus refuses more than 11,000 per series).
const MAX_POINTS: u32 = 2_000;

/// Where and how to query (`--prometheus`, `--prometheus-ca`, `--prometheus-token-file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusOptions {
    /// The API's base URL, e.g. `https://prometheus.example:9090` or a Mimir
    /// `https://mimir.example/prometheus` (the `/api/v1/…` paths are appended).
    pub url: String,
    /// PEM certificates to trust instead of the system's roots.
    pub ca_file: Option<PathBuf>,
    /// A file holding a bearer token sent with each query (read again as it changes).
    pub token_file: Option<PathBuf>,
    /// How far back the first query reaches: the widest chart window.
    pub history: Duration,
}

/// What went wrong with a query.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrometheusError {
    /// The API answered an error (4xx/5xx, or a 200 with `"status": "error"`).
    #[error("answered {code} ({error_type}): {error}")]
    Api {
        /// The HTTP status code.
        code: u16,
        /// Prometheus' `errorType` (`bad_data`, `execution`, …), or the HTTP reason.
        error_type: String,
        /// Prometheus' `error` text, or the start of the body.
        error: String,
    },
    /// The answer is not the JSON of a query result.
    #[error("answered {code} with something that is not a Prometheus query result: {detail}")]
    NotAResult {
        /// The HTTP status code.
        code: u16,
        /// What is wrong, with the start of the body.
        detail: String,
    },
}

/// A sample of a query answer: its metric name, its other labels, its value.
type NamedSample = (String, Vec<(String, String)>, f64);

/// The PromQL selector of every admission series hookscope charts: the counters by name, the
/// histograms' `_bucket`, `_sum` and `_count` series.
pub fn admission_selector() -> String {
    let names: Vec<String> = AdmissionFamily::ALL
        .iter()
        .map(|f| {
            if f.is_histogram() {
                format!("{}_(bucket|sum|count)", f.name())
            } else {
                f.name().to_string()
            }
        })
        .collect();
    format!("{{__name__=~\"{}\"}}", names.join("|"))
}

/// The admission series of one query answer (HTTP status `code` and `body`), by evaluation
/// time, oldest first: a range query's matrix gives one snapshot per step, an instant query's
/// vector one. Every label but `__name__` is kept (`instance` among them).
pub fn parse_answer(
    code: u16,
    body: &[u8],
) -> Result<Vec<(SystemTime, AdmissionSnapshot)>, PrometheusError> {
    let snippet = || {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        match text.char_indices().nth(200) {
            Some((i, _)) => format!("{}…", &text[..i]),
            None => text.to_string(),
        }
    };
    let value: Value = match crate::json::from_slice(body) {
        Ok(v) => v,
        Err(e) if (200..300).contains(&code) => {
            return Err(PrometheusError::NotAResult {
                code,
                detail: format!("{e}: {}", snippet()),
            });
        }
        Err(_) => {
            return Err(PrometheusError::Api {
                code,
                error_type: http::StatusCode::from_u16(code)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or("error")
                    .to_string(),
                error: snippet(),
            });
        }
    };
    if value["status"].as_str() != Some("success") || !(200..300).contains(&code) {
        return Err(PrometheusError::Api {
            code,
            error_type: value["errorType"].as_str().unwrap_or("error").to_string(),
            error: value["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(snippet),
        });
    }
    let data = &value["data"];
    let not_a_result = |detail: &str| PrometheusError::NotAResult {
        code,
        detail: detail.to_string(),
    };
    let results = data["result"]
        .as_array()
        .ok_or_else(|| not_a_result("data.result is not a list"))?;
    // Samples by evaluation time (milliseconds, as Prometheus keeps them).
    let mut by_time: BTreeMap<i64, Vec<NamedSample>> = BTreeMap::new();
    for series in results {
        let Some(metric) = series["metric"].as_object() else {
            continue;
        };
        let Some(name) = metric.get("__name__").and_then(Value::as_str) else {
            continue;
        };
        let labels: Vec<(String, String)> = metric
            .iter()
            .filter(|(k, _)| *k != "__name__")
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect();
        let points: Vec<&Value> = match data["resultType"].as_str() {
            Some("matrix") => series["values"].as_array().into_iter().flatten().collect(),
            Some("vector") => vec![&series["value"]],
            other => {
                return Err(not_a_result(&format!(
                    "resultType {other:?}, not a matrix or vector"
                )));
            }
        };
        for point in points {
            let (Some(t), Some(v)) = (point[0].as_f64(), point[1].as_str()) else {
                continue;
            };
            let Ok(v) = v.parse::<f64>() else {
                continue;
            };
            by_time
                .entry((t * 1000.0).round() as i64)
                .or_default()
                .push((name.to_string(), labels.clone(), v));
        }
    }
    Ok(by_time
        .into_iter()
        .filter(|(ms, _)| *ms >= 0)
        .map(|(ms, samples)| {
            let at = UNIX_EPOCH + Duration::from_millis(ms as u64);
            let snapshot = AdmissionSnapshot::from_samples(
                samples
                    .iter()
                    .map(|(n, l, v)| (n.as_str(), l.as_slice(), *v)),
            );
            (at, snapshot)
        })
        .collect())
}

/// Percent-encodes a query parameter value (everything but RFC 3986's unreserved characters).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unix(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    format!("{secs:.3}")
}

/// Why `--prometheus` and its flags cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrometheusFlagError {
    /// The URL does not parse, or has no host.
    #[error("--prometheus {url:?} is not a URL: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// Why.
        reason: String,
    },
    /// A plain `http://` URL to a host other than loopback: the token and the answers would
    /// cross the network unencrypted.
    #[error(
        "--prometheus {url:?}: plain http is accepted only on loopback (a kubectl port-forward); use https"
    )]
    PlainHttp {
        /// The URL given.
        url: String,
    },
    /// `--prometheus-ca` cannot be read, or holds no PEM certificate.
    #[error("--prometheus-ca {}: {reason}", path.display())]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// `--prometheus-token-file` cannot be read.
    #[error("--prometheus-token-file {}: {reason}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl PrometheusOptions {
    /// The client configuration: the URL's server, the CA file's certificates (else the
    /// system's roots), the token file; refused with the flag at fault before anything is sent.
    pub fn config(&self) -> Result<kube::Config, PrometheusFlagError> {
        let url: http::Uri =
            self.url
                .parse()
                .map_err(|e: http::uri::InvalidUri| PrometheusFlagError::Url {
                    url: self.url.clone(),
                    reason: e.to_string(),
                })?;
        let host = url.host().unwrap_or("").trim_matches(['[', ']']);
        match url.scheme_str() {
            Some("https") if !host.is_empty() => {}
            Some("http") if !host.is_empty() => {
                let loopback = host == "localhost"
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback());
                if !loopback {
                    return Err(PrometheusFlagError::PlainHttp {
                        url: self.url.clone(),
                    });
                }
            }
            _ => {
                return Err(PrometheusFlagError::Url {
                    url: self.url.clone(),
                    reason: "give the API's base URL, e.g. https://prometheus.example:9090".into(),
                });
            }
        }
        let mut config = kube::Config::new(url);
        if let Some(path) = &self.ca_file {
            use rustls_pki_types::pem::PemObject as _;
            let ca = |reason: String| PrometheusFlagError::Ca {
                path: path.clone(),
                reason,
            };
            let pem = std::fs::read(path).map_err(|e| ca(e.to_string()))?;
            let certs: Vec<Vec<u8>> = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
                .filter_map(Result::ok)
                .map(|c| c.to_vec())
                .collect();
            if certs.is_empty() {
                return Err(ca(
                    "no PEM certificate (-----BEGIN CERTIFICATE-----) in the file".into(),
                ));
            }
            config.root_cert = Some(certs);
        }
        if let Some(path) = &self.token_file {
            std::fs::read(path).map_err(|e| PrometheusFlagError::TokenFile {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            config.auth_info.token_file = Some(path.display().to_string());
        }
        Ok(config)
    }
}

/// The client of [`PrometheusOptions::config`].
fn client(options: &PrometheusOptions) -> Result<kube::Client, Failure> {
    let failure = |reason: String| Failure {
        kind: FailureKind::Kubeconfig,
        reason,
        action: "Check --prometheus, --prometheus-ca and --prometheus-token-file.".to_string(),
        rbac: None,
        retry_in: Duration::ZERO,
    };
    let config = options.config().map_err(|e| failure(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| {
        failure(format!(
            "cannot set up the client of --prometheus {}: {}",
            options.url,
            chain_text(&e)
        ))
    })
}

/// One query: the path and query string under the API's base URL.
async fn query(
    client: &kube::Client,
    options: &PrometheusOptions,
    path_and_query: &str,
    timeout: Duration,
) -> Result<Vec<(SystemTime, AdmissionSnapshot)>, Failure> {
    let unreachable = |reason: String| Failure {
        kind: FailureKind::Unreachable,
        reason,
        action: "Check the URL and that the Prometheus-compatible API is reachable from here."
            .to_string(),
        rbac: None,
        retry_in: Duration::ZERO,
    };
    let request = http::Request::get(path_and_query)
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::empty())
        .map_err(|e| unreachable(format!("cannot build the query: {e}")))?;
    let answer = async {
        let response = client.send(request).await?;
        let code = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, kube::Error>((code, body))
    };
    let (code, body) = match tokio::time::timeout(timeout, answer).await {
        Err(_) => {
            return Err(unreachable(format!(
                "Prometheus at {} did not answer within {timeout:.1?}.",
                options.url
            )));
        }
        Ok(Err(e)) => {
            let text = chain_text(&e);
            let tls = text.to_lowercase().contains("certificate");
            return Err(Failure {
                kind: if tls {
                    FailureKind::Tls
                } else {
                    FailureKind::Unreachable
                },
                reason: format!("Cannot query Prometheus at {}: {text}", options.url),
                action: if tls {
                    "The server's certificate is not trusted: give its CA with --prometheus-ca FILE."
                        .to_string()
                } else {
                    "Check the URL and that the Prometheus-compatible API is reachable from here."
                        .to_string()
                },
                rbac: None,
                retry_in: Duration::ZERO,
            });
        }
        Ok(Ok(answer)) => answer,
    };
    // A range answer of a large control plane is megabytes of JSON: parsed off the runtime's
    // threads.
    let parsed = tokio::task::spawn_blocking(move || parse_answer(code, &body))
        .await
        .map_err(|e| unreachable(format!("parsing the answer failed: {e}")))?;
    parsed.map_err(|e| Failure {
        kind: match code {
            401 | 403 => FailureKind::Unauthorized,
            _ => FailureKind::Server,
        },
        reason: format!("Prometheus at {} {e}", options.url),
        action: match code {
            401 | 403 => "Give a bearer token the API accepts (--prometheus-token-file FILE).",
            400 | 422 => "The API refused hookscope's query; it may not be Prometheus-compatible.",
            _ => "Check the API's health; hookscope asks again.",
        }
        .to_string(),
        rbac: None,
        retry_in: Duration::ZERO,
    })
}

/// Queries every scrape interval until the receiver is gone: first the range over
/// [`PrometheusOptions::history`], then the latest values. Each outcome is the
/// [`Feed::Prometheus`] feed's.
pub(super) async fn query_loop(
    prometheus: PrometheusOptions,
    options: ClusterOptions,
    tx: mpsc::Sender<ClusterMsg>,
) {
    let interval = options.scrape_interval.max(Duration::from_millis(10));
    let timeout = interval.max(Duration::from_secs(10));
    let client = match client(&prometheus) {
        Ok(c) => c,
        Err(failure) => {
            let _ = send(
                &tx,
                ClusterMsg::FeedFailed {
                    feed: Feed::Prometheus,
                    failure,
                },
            )
            .await;
            tx.closed().await;
            return;
        }
    };
    let selector = encode(&admission_selector());
    let mut filled = false;
    let mut failing = true;
    loop {
        let started = Instant::now();
        let now = SystemTime::now();
        let path = if filled {
            format!("/api/v1/query?query={selector}&time={}", unix(now))
        } else {
            let history = prometheus.history.max(interval);
            let step = interval.max(history / MAX_POINTS);
            format!(
                "/api/v1/query_range?query={selector}&start={}&end={}&step={:.3}",
                unix(now - history),
                unix(now),
                step.as_secs_f64()
            )
        };
        let message = match query(&client, &prometheus, &path, timeout).await {
            Ok(points) if !points.is_empty() => {
                filled = true;
                if failing {
                    failing = false;
                    if !send(&tx, ClusterMsg::FeedRecovered(Feed::Prometheus)).await {
                        return;
                    }
                }
                ClusterMsg::Queried(points)
            }
            Ok(_) => {
                failing = true;
                ClusterMsg::FeedFailed {
                    feed: Feed::Prometheus,
                    failure: Failure {
                        kind: FailureKind::Server,
                        reason: format!(
                            "Prometheus at {} has no admission series (query {}).",
                            prometheus.url,
                            admission_selector()
                        ),
                        action: "Check that it scrapes the apiservers' /metrics (a job of the kube-apiserver targets), and that the cluster has admission webhooks or policies that were called.".to_string(),
                        rbac: None,
                        retry_in: interval,
                    },
                }
            }
            Err(mut failure) => {
                failing = true;
                failure.retry_in = interval;
                ClusterMsg::FeedFailed {
                    feed: Feed::Prometheus,
                    failure,
                }
            }
        };
        if !send(&tx, message).await {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(started + interval) => {}
            _ = tx.closed() => return,
        }
    }
}
