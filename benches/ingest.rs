//! Ingest rate of `hookscope replay` inputs: an audit log of realistic events (at least 500 MB by
//! default) is generated into a temporary folder, then read with [`Reader::read`] and a sink
//! that only counts items.
//!
//! `cargo bench --bench ingest`; `HOOKSCOPE_INGEST_MB=N` sets the size of the log, and
//! `HOOKSCOPE_INGEST_LOG=FILE` reads that file instead (generating it there first, and keeping it,
//! when it does not exist). The generated log is
//! level `RequestResponse` with both stages of every request: reads (get, list), watches and
//! non-resource requests as the noise a real log is mostly made of, and creates, updates, JSON
//! and merge patches and deletes of configmaps and pods across namespaces. After the run the
//! benchmark prints what was read and the process's peak resident memory (`VmHWM`).

use std::fmt::Write as _;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use divan::Bencher;
use divan::counter::BytesCount;
use hookscope::replay::InputItem;
use hookscope::replay::input::{ClusterState, Reader};

#[path = "../src/allocator.rs"]
mod allocator;

// The allocator of the `hookscope` binary, so the figures are the command's (as in the replay
// and engine benches).
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

static LOG: OnceLock<(PathBuf, u64)> = OnceLock::new();

fn main() {
    let mb: u64 = std::env::var("HOOKSCOPE_INGEST_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    if let Some(given) = std::env::var_os("HOOKSCOPE_INGEST_LOG") {
        let path = PathBuf::from(given);
        if !path.exists() {
            generate(&path, mb << 20).expect("generate the audit log");
        }
        let size = std::fs::metadata(&path)
            .expect("HOOKSCOPE_INGEST_LOG")
            .len();
        LOG.set((path, size)).expect("once");
        return divan::main();
    }
    let dir = std::env::temp_dir().join(format!("hookscope-ingest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    let path = dir.join("audit.log");
    let size = generate(&path, mb << 20).expect("generate the audit log");
    LOG.set((path, size)).expect("once");
    divan::main();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads the whole log once per sample.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn audit_log(bencher: Bencher) {
    let (path, size) = LOG.get().expect("generated");
    bencher.counter(BytesCount::new(*size)).bench(|| {
        let mut reader = Reader::new(ClusterState::new());
        let mut counts = [0usize; 3];
        let mut sink = |item: InputItem| {
            counts[match item {
                InputItem::Request(_) => 0,
                InputItem::NotReplayable(_) => 1,
                InputItem::Invalid(_) => 2,
            }] += 1;
        };
        let file = std::fs::File::open(path).expect("log");
        reader
            .read("audit.log", &mut BufReader::with_capacity(1 << 20, file), &mut sink)
            .expect("readable");
        reader.finish(&mut sink);
        eprintln!(
            "read {:.0} MB: {} requests, {} not replayable, {} invalid; {} objects known; peak RSS {}",
            *size as f64 / 1e6,
            counts[0],
            counts[1],
            counts[2],
            reader.known_objects(),
            peak_rss()
        );
        counts
    });
}

fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l["VmHWM:".len()..].trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const NAMESPACES: u64 = 40;
const CONFIGMAPS: u64 = 60;
const PODS: u64 = 40;

/// The state of the generated cluster: the resource version of each object, 0 when absent.
struct Cluster {
    rv: u64,
    configmaps: Vec<u64>,
    pods: Vec<u64>,
    clock: u64,
    id: u64,
}

impl Cluster {
    /// Records the resource version of a pod or configmap (0: deleted).
    fn set(&mut self, pods: bool, slot: usize, rv: u64) {
        let states = if pods {
            &mut self.pods
        } else {
            &mut self.configmaps
        };
        states[slot] = rv;
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }
}

fn timestamp(clock: u64) -> String {
    let (s, us) = (clock / 1_000_000, clock % 1_000_000);
    format!(
        "2025-03-01T{:02}:{:02}:{:02}.{us:06}Z",
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60
    )
}

fn configmap(ns: u64, i: u64, rv: u64, generation: u64) -> String {
    let mut data = String::new();
    for k in 0..6 {
        let _ = write!(
            data,
            r#"{}"key-{k}.properties":"setting.{k}.value={generation}\nsetting.{k}.enabled=true\nsetting.{k}.owner=team-{ns}""#,
            if k == 0 { "" } else { "," }
        );
    }
    format!(
        r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"cm-{i}","namespace":"ns-{ns}","uid":"6f1c2a3b-{ns:04}-4{i:03}-8000-00000000{rv:04}","resourceVersion":"{rv}","creationTimestamp":"2025-03-01T00:00:00Z","labels":{{"app":"app-{i}","tier":"backend","team":"team-{ns}"}},"annotations":{{"example.com/revision":"{generation}"}},"managedFields":[{{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"v1","time":"2025-03-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{".":{{}},"f:key-0.properties":{{}}}},"f:metadata":{{"f:labels":{{".":{{}},"f:app":{{}}}}}}}}}}]}},"data":{{{data}}}}}"#
    )
}

fn pod(ns: u64, i: u64, rv: u64) -> String {
    format!(
        r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"pod-{i}","namespace":"ns-{ns}","uid":"8a7b6c5d-{ns:04}-4{i:03}-9000-00000000{rv:04}","resourceVersion":"{rv}","creationTimestamp":"2025-03-01T00:00:00Z","labels":{{"app":"app-{i}","pod-template-hash":"5d8f7c9b6"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"app-{i}-5d8f7c9b6","uid":"11111111-2222-4333-8444-{i:012}","controller":true,"blockOwnerDeletion":true}}]}},"spec":{{"volumes":[{{"name":"kube-api-access","projected":{{"sources":[{{"serviceAccountToken":{{"expirationSeconds":3607,"path":"token"}}}},{{"configMap":{{"name":"kube-root-ca.crt","items":[{{"key":"ca.crt","path":"ca.crt"}}]}}}}],"defaultMode":420}}}}],"containers":[{{"name":"app","image":"registry.example.com/team-{ns}/app:1.{i}.0","ports":[{{"containerPort":8080,"protocol":"TCP"}}],"env":[{{"name":"MODE","value":"production"}},{{"name":"POD_NAME","valueFrom":{{"fieldRef":{{"apiVersion":"v1","fieldPath":"metadata.name"}}}}}}],"resources":{{"limits":{{"cpu":"500m","memory":"256Mi"}},"requests":{{"cpu":"100m","memory":"128Mi"}}}},"volumeMounts":[{{"name":"kube-api-access","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","serviceAccount":"default","nodeName":"node-{n}","securityContext":{{}},"schedulerName":"default-scheduler","tolerations":[{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"}},"status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2025-03-01T00:00:05Z"}},{{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2025-03-01T00:00:00Z"}}],"hostIP":"10.0.{ns}.1","podIP":"10.244.{ns}.{i}","startTime":"2025-03-01T00:00:00Z","containerStatuses":[{{"name":"app","state":{{"running":{{"startedAt":"2025-03-01T00:00:04Z"}}}},"ready":true,"restartCount":0,"image":"registry.example.com/team-{ns}/app:1.{i}.0","imageID":"registry.example.com/team-{ns}/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","started":true}}],"qosClass":"Burstable"}}}}"#,
        n = i % 7
    )
}

struct Request<'a> {
    verb: &'a str,
    uri: String,
    object_ref: String,
    code: u16,
    request_object: Option<String>,
    response_object: Option<String>,
    user: &'a str,
    stages: &'a [&'a str],
}

const CONTROLLER: &str = r#"{"username":"system:serviceaccount:kube-system:replicaset-controller","uid":"3c1d2e4f-aaaa-4bbb-8ccc-0123456789ab","groups":["system:serviceaccounts","system:serviceaccounts:kube-system","system:authenticated"]}"#;
const KUBELET: &str = r#"{"username":"system:node:node-3","groups":["system:nodes","system:authenticated"],"extra":{"authentication.kubernetes.io/credential-id":["X509SHA256=0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"]}}"#;
const USER: &str = r#"{"username":"dev@example.com","groups":["developers","system:authenticated"],"extra":{"authentication.kubernetes.io/credential-id":["JTI=7f0e1d2c-3b4a-4596-8877-665544332211"]}}"#;

fn write_request(out: &mut impl Write, c: &mut Cluster, r: &Request<'_>) -> std::io::Result<()> {
    c.id += 1;
    let id = format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        c.id * 2654435761 % 0xffff_ffff,
        c.id % 0xffff,
        c.id % 0xfff,
        c.id % 0xfff,
        c.id
    );
    let received = timestamp(c.clock);
    for stage in r.stages {
        c.clock += 137;
        let mut line = format!(
            r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"{id}","stage":"{stage}","requestURI":"{uri}","verb":"{verb}","user":{user},"sourceIPs":["10.0.3.17"],"userAgent":"kube-controller-manager/v1.32.2 (linux/amd64) kubernetes/67a30c0/system:serviceaccount:kube-system:replicaset-controller","objectRef":{oref}"#,
            uri = r.uri,
            verb = r.verb,
            user = r.user,
            oref = r.object_ref
        );
        let complete = *stage == "ResponseComplete";
        if complete || *stage == "ResponseStarted" {
            let _ = write!(
                line,
                r#","responseStatus":{{"metadata":{{}},"code":{}}}"#,
                r.code
            );
        }
        if complete {
            if let Some(o) = &r.request_object {
                let _ = write!(line, r#","requestObject":{o}"#);
            }
            if let Some(o) = &r.response_object {
                let _ = write!(line, r#","responseObject":{o}"#);
            }
        }
        let _ = write!(
            line,
            r#","requestReceivedTimestamp":"{received}","stageTimestamp":"{}","annotations":{{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \"system:controller:replicaset-controller\" of ClusterRole \"system:controller:replicaset-controller\" to ServiceAccount \"replicaset-controller/kube-system\""}}}}"#,
            timestamp(c.clock)
        );
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// Writes a log of at least `target` bytes to `path`; returns its size.
fn generate(path: &Path, target: u64) -> std::io::Result<u64> {
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut c = Cluster {
        rv: 100,
        configmaps: vec![0; (NAMESPACES * CONFIGMAPS) as usize],
        pods: vec![0; (NAMESPACES * PODS) as usize],
        clock: 0,
        id: 0,
    };
    let both: &[&str] = &["RequestReceived", "ResponseComplete"];
    let watch: &[&str] = &["RequestReceived", "ResponseStarted", "ResponseComplete"];
    for ns in 0..NAMESPACES {
        let rv = c.next_rv();
        let body = format!(
            r#"{{"kind":"Namespace","apiVersion":"v1","metadata":{{"name":"ns-{ns}","resourceVersion":"{rv}","labels":{{"kubernetes.io/metadata.name":"ns-{ns}","team":"team-{ns}"}}}},"spec":{{"finalizers":["kubernetes"]}},"status":{{"phase":"Active"}}}}"#
        );
        write_request(
            &mut out,
            &mut c,
            &Request {
                verb: "create",
                uri: "/api/v1/namespaces".into(),
                object_ref: format!(
                    r#"{{"resource":"namespaces","name":"ns-{ns}","apiVersion":"v1"}}"#
                ),
                code: 201,
                request_object: Some(body.clone()),
                response_object: Some(body),
                user: USER,
                stages: both,
            },
        )?;
    }
    let mut written = 0u64;
    let mut generation = 0u64;
    while written < target {
        let before = out.get_ref().metadata()?.len() + out.buffer().len() as u64;
        for _ in 0..200 {
            generation += 1;
            let ns = rng.below(NAMESPACES);
            let roll = rng.below(100);
            let pods = roll.is_multiple_of(2);
            let (kind_count, resource) = if pods {
                (PODS, "pods")
            } else {
                (CONFIGMAPS, "configmaps")
            };
            let i = rng.below(kind_count);
            let slot = (ns * kind_count + i) as usize;
            let rv_now = if pods {
                c.pods[slot]
            } else {
                c.configmaps[slot]
            };
            let object = |rv: u64| {
                if pods {
                    pod(ns, i, rv)
                } else {
                    configmap(ns, i, rv, generation)
                }
            };
            let name = if pods {
                format!("pod-{i}")
            } else {
                format!("cm-{i}")
            };
            let oref = format!(
                r#"{{"resource":"{resource}","namespace":"ns-{ns}","name":"{name}","apiVersion":"v1"}}"#
            );
            let item_uri = format!("/api/v1/namespaces/ns-{ns}/{resource}/{name}");
            let request = match roll {
                // Reads and watches: most of a real log.
                0..=34 => Request {
                    verb: "get",
                    uri: item_uri,
                    object_ref: oref,
                    code: if rv_now == 0 { 404 } else { 200 },
                    request_object: None,
                    response_object: (rv_now != 0).then(|| object(rv_now)),
                    user: KUBELET,
                    stages: both,
                },
                35..=42 => {
                    let mut items = String::new();
                    let (states, count) = if pods {
                        (&c.pods, PODS)
                    } else {
                        (&c.configmaps, CONFIGMAPS)
                    };
                    for j in 0..count.min(8) {
                        let rv = states[(ns * count + j) as usize];
                        if rv != 0 {
                            if !items.is_empty() {
                                items.push(',');
                            }
                            let full = if pods {
                                pod(ns, j, rv)
                            } else {
                                configmap(ns, j, rv, generation)
                            };
                            // List items are written without type meta.
                            items.push('{');
                            items.push_str(&full[full.find(r#""metadata""#).unwrap_or(1)..]);
                        }
                    }
                    let list_kind = if pods { "PodList" } else { "ConfigMapList" };
                    Request {
                        verb: "list",
                        uri: format!("/api/v1/namespaces/ns-{ns}/{resource}?limit=500"),
                        object_ref: format!(
                            r#"{{"resource":"{resource}","namespace":"ns-{ns}","apiVersion":"v1"}}"#
                        ),
                        code: 200,
                        request_object: None,
                        response_object: Some(format!(
                            r#"{{"kind":"{list_kind}","apiVersion":"v1","metadata":{{"resourceVersion":"{}"}},"items":[{items}]}}"#,
                            c.rv
                        )),
                        user: CONTROLLER,
                        stages: both,
                    }
                }
                43..=52 => Request {
                    verb: "watch",
                    uri: format!(
                        "/api/v1/namespaces/ns-{ns}/{resource}?allowWatchBookmarks=true&resourceVersion={}&timeout=7m5s&watch=true",
                        c.rv
                    ),
                    object_ref: format!(
                        r#"{{"resource":"{resource}","namespace":"ns-{ns}","apiVersion":"v1"}}"#
                    ),
                    code: 200,
                    request_object: None,
                    response_object: None,
                    user: CONTROLLER,
                    stages: watch,
                },
                53..=59 => Request {
                    verb: "get",
                    uri: "/readyz".into(),
                    object_ref: "null".into(),
                    code: 200,
                    request_object: None,
                    response_object: None,
                    user: KUBELET,
                    stages: both,
                },
                // Writes.
                60..=75 if rv_now == 0 => {
                    let rv = c.next_rv();
                    let mut body = object(rv);
                    body = body.replace(&format!(r#""resourceVersion":"{rv}","#), "");
                    c.set(pods, slot, rv);
                    Request {
                        verb: "create",
                        uri: format!(
                            "/api/v1/namespaces/ns-{ns}/{resource}?fieldManager=kube-controller-manager"
                        ),
                        object_ref: format!(
                            r#"{{"resource":"{resource}","namespace":"ns-{ns}","name":"{name}","apiVersion":"v1"}}"#
                        ),
                        code: 201,
                        request_object: Some(body),
                        response_object: Some(object(rv)),
                        user: CONTROLLER,
                        stages: both,
                    }
                }
                60..=85 if rv_now != 0 => {
                    let rv = c.next_rv();
                    c.set(pods, slot, rv);
                    Request {
                        verb: "update",
                        uri: format!("{item_uri}?fieldManager=kube-controller-manager"),
                        object_ref: oref,
                        code: 200,
                        request_object: Some(object(rv_now)),
                        response_object: Some(object(rv)),
                        user: CONTROLLER,
                        stages: both,
                    }
                }
                86..=95 if rv_now != 0 => {
                    let rv = c.next_rv();
                    c.set(pods, slot, rv);
                    let body = if roll.is_multiple_of(4) {
                        format!(
                            r#"[{{"op":"replace","path":"/metadata/labels/tier","value":"tier-{generation}"}}]"#
                        )
                    } else {
                        format!(
                            r#"{{"metadata":{{"annotations":{{"example.com/revision":"{generation}"}}}}}}"#
                        )
                    };
                    Request {
                        verb: "patch",
                        uri: item_uri,
                        object_ref: oref,
                        code: 200,
                        request_object: Some(body),
                        response_object: Some(object(rv)),
                        user: USER,
                        stages: both,
                    }
                }
                _ if rv_now != 0 => {
                    c.set(pods, slot, 0);
                    Request {
                        verb: "delete",
                        uri: item_uri,
                        object_ref: oref,
                        code: 200,
                        request_object: Some(r#"{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Background"}"#.into()),
                        response_object: Some(format!(r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Success","details":{{"name":"{name}","kind":"{resource}","uid":"x"}}}}"#)),
                        user: USER,
                        stages: both,
                    }
                }
                _ => continue,
            };
            write_request(&mut out, &mut c, &request)?;
        }
        let after = out.get_ref().metadata()?.len() + out.buffer().len() as u64;
        written += after - before;
    }
    out.flush()?;
    Ok(std::fs::metadata(path)?.len())
}
