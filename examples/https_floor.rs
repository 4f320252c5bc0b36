//! The transport's floor: hookscope's HTTPS client posting one prebuilt AdmissionReview over and
//! over, with no dispatch, no input and no report. `benches/wrk-side-by-side.sh` runs it beside
//! `hookscope replay` and wrk, so that the replay's rate can be split into what the client stack
//! (tokio, hyper, rustls, the kernel) costs and what the admission work costs.
//!
//!     https_floor --service NAME.NS.svc:PORT[/PATH] --addr ADDR:PORT --ca CA.pem --body FILE
//!                 [-n REQUESTS] [-c CONCURRENCY]
//!
//! Prints the request rate. Every reply must be an HTTP 200, or it exits with 1.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use hookscope::api::WebhookKind;
use hookscope::api::{ServiceReference, WebhookClientConfig};
use hookscope::engine::call::{ReplyOutcome, WebhookCall};
use hookscope::engine::endpoint::endpoint;
use hookscope::transport::{HttpsOptions, HttpsReplier};

struct Args {
    service: String,
    addr: String,
    ca: String,
    body: String,
    requests: usize,
    concurrency: usize,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        service: String::new(),
        addr: String::new(),
        ca: String::new(),
        body: String::new(),
        requests: 30_000,
        concurrency: 16,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--service" => a.service = value()?,
            "--addr" => a.addr = value()?,
            "--ca" => a.ca = value()?,
            "--body" => a.body = value()?,
            "-n" => a.requests = value()?.parse().map_err(|e| format!("-n: {e}"))?,
            "-c" => a.concurrency = value()?.parse().map_err(|e| format!("-c: {e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.service.is_empty() || a.addr.is_empty() || a.ca.is_empty() || a.body.is_empty() {
        return Err("--service, --addr, --ca and --body are required".into());
    }
    Ok(a)
}

fn call(a: &Args) -> Result<(WebhookCall, HttpsReplier), String> {
    let (host_port, path) = match a.service.split_once('/') {
        Some((h, p)) => (h, format!("/{p}")),
        None => (a.service.as_str(), "/".to_string()),
    };
    let (host, port) = host_port
        .rsplit_once(':')
        .ok_or("--service needs NAME.NS.svc:PORT")?;
    let mut labels = host.split('.');
    let (name, namespace) = (
        labels.next().unwrap_or_default(),
        labels.next().unwrap_or_default(),
    );
    let ca = std::fs::read(&a.ca).map_err(|e| format!("--ca {}: {e}", a.ca))?;
    let cfg = WebhookClientConfig {
        url: None,
        service: Some(ServiceReference {
            namespace: namespace.into(),
            name: name.into(),
            path: Some(path),
            port: Some(port.parse().map_err(|e| format!("--service port: {e}"))?),
        }),
        ca_bundle: Some(ca.clone()),
    };
    let body = std::fs::read(&a.body).map_err(|e| format!("--body {}: {e}", a.body))?;
    let call = WebhookCall {
        phase: WebhookKind::Validating,
        round: 0,
        index: 0,
        configuration: "floor".into(),
        webhook: "floor".into(),
        uid: "floor/floor/0".into(),
        endpoint: endpoint(&cfg, 10)?.into(),
        ca_bundle: Some(ca.into()),
        timeout: Duration::from_secs(10),
        review_version: "v1",
        request_uid: String::new(),
        body: body.into(),
    };
    let addr = a.addr.parse().map_err(|e| format!("--addr: {e}"))?;
    let replier = HttpsReplier::new(HttpsOptions {
        resolve: [(host_port.to_string(), addr)].into(),
        ..HttpsOptions::default()
    });
    Ok((call, replier))
}

fn main() -> ExitCode {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (call, replier) = match call(&a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (ok, elapsed) = rt.block_on(async {
        let start = Instant::now();
        let mut in_flight = FuturesUnordered::new();
        let (mut started, mut ok) = (0, 0);
        while started < a.requests || !in_flight.is_empty() {
            while started < a.requests && in_flight.len() < a.concurrency {
                in_flight.push(replier.call(&call));
                started += 1;
            }
            if let Some(reply) = in_flight.next().await
                && matches!(reply.outcome, ReplyOutcome::Http { status: 200, .. })
            {
                ok += 1;
            }
        }
        (ok, start.elapsed())
    });
    let rate = a.requests as f64 / elapsed.as_secs_f64();
    println!(
        "{} requests in {:.2}s = {rate:.0} req/s, {ok} answered 200",
        a.requests,
        elapsed.as_secs_f64()
    );
    if ok == a.requests {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
