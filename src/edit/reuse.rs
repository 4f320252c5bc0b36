//! Reusing webhook replies across re-dispatches: after an edit, a call whose request content is
//! what the same webhook was already sent is answered with the reply already received, so
//! editing a selector does not call every webhook again.
//!
//! A call is "the same" when the configuration name, webhook name, phase, endpoint (URL with its
//! `?timeout=`, server name, port, credentials target), caBundle and AdmissionReview version are
//! equal, and the AdmissionReview body is byte-for-byte equal except for `request.uid` (fresh on
//! every call). A reused reply has its `response.uid` rewritten to the new call's uid, as the
//! webhook would have answered. Replies of cancelled calls and panics are never kept.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::hash::{ContentHash, Hasher128};
use crate::api::WebhookKind;
use crate::engine::{Replier, Reply, ReplyOutcome, WebhookCall};

/// Replies kept by default: a little over the calls of 50,000 requests through five webhooks.
/// Each entry holds its reply (the response body, typically a few hundred bytes) and about 100
/// bytes of bookkeeping.
pub const DEFAULT_CAPACITY: usize = 250_000;

/// A kept reply and the uid of the call it answered.
#[derive(Debug, Clone)]
struct Kept {
    reply: Reply,
    uid: String,
}

#[derive(Debug, Default)]
struct Store {
    replies: HashMap<ContentHash, Kept>,
    /// Insertion order, for evicting the oldest entries first.
    order: VecDeque<ContentHash>,
    /// Clears so far: a reply to a call made before the last clear is not kept.
    epoch: u64,
}

/// When a call was made, as far as [`ReplyCache::clear`] is concerned: its reply is kept only
/// if the cache was not cleared meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch(u64);

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    evicted: AtomicU64,
}

/// Counts of a [`ReplyCache`] since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Calls answered from the cache.
    pub hits: u64,
    /// Calls forwarded to the inner replier.
    pub misses: u64,
    /// Entries dropped to stay within capacity.
    pub evicted: u64,
    /// Entries held now.
    pub entries: usize,
}

/// Replies already received, keyed by call content; shared by clones (and so by every task of a
/// replay) and safe to use from several threads. Holds at most `capacity` replies, dropping the
/// oldest first.
#[derive(Debug, Clone)]
pub struct ReplyCache {
    store: Arc<Mutex<Store>>,
    counters: Arc<Counters>,
    capacity: usize,
}

impl Default for ReplyCache {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl ReplyCache {
    /// An empty cache holding at most `capacity` replies (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            store: Arc::default(),
            counters: Arc::default(),
            capacity: capacity.max(1),
        }
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counts so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.counters.hits.load(Ordering::Relaxed),
            misses: self.counters.misses.load(Ordering::Relaxed),
            evicted: self.counters.evicted.load(Ordering::Relaxed),
            entries: self.store().replies.len(),
        }
    }

    /// Forgets every reply (e.g. when the user asks to call the webhooks again), and every reply
    /// still to come to a call made before.
    pub fn clear(&self) {
        let mut s = self.store();
        s.replies.clear();
        s.order.clear();
        s.epoch += 1;
    }

    /// Now, for a call about to be made: what [`ReplyCache::insert`] is given with its reply.
    pub fn epoch(&self) -> Epoch {
        Epoch(self.store().epoch)
    }

    /// The reply for a call, when the same content was answered before.
    pub fn lookup(&self, call: &WebhookCall) -> Option<Reply> {
        self.lookup_key(call_key(call), call)
    }

    fn lookup_key(&self, key: ContentHash, call: &WebhookCall) -> Option<Reply> {
        let kept = self.store().replies.get(&key).cloned();
        let counter = match kept {
            Some(_) => &self.counters.hits,
            None => &self.counters.misses,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        kept.map(|k| readdressed(k, &call.request_uid))
    }

    /// Keeps the reply to a call made at `since` (not for cancelled calls or panics, nor when the
    /// cache was cleared after the call was made).
    pub fn insert(&self, since: Epoch, call: &WebhookCall, reply: &Reply) {
        self.insert_key(since, call_key(call), call, reply);
    }

    fn insert_key(&self, since: Epoch, key: ContentHash, call: &WebhookCall, reply: &Reply) {
        if matches!(
            reply.outcome,
            ReplyOutcome::Canceled | ReplyOutcome::Panicked(_)
        ) {
            return;
        }
        let kept = Kept {
            reply: reply.clone(),
            uid: call.request_uid.clone(),
        };
        let mut s = self.store();
        if s.epoch != since.0 {
            return;
        }
        if s.replies.insert(key, kept).is_none() {
            s.order.push_back(key);
        }
        while s.replies.len() > self.capacity {
            let Some(old) = s.order.pop_front() else {
                break;
            };
            s.replies.remove(&old);
            self.counters.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A reply kept for another call, with the old uid replaced by the new one wherever the body
/// quotes it (its `response.uid`).
fn readdressed(kept: Kept, uid: &str) -> Reply {
    let mut reply = kept.reply;
    if let ReplyOutcome::Http { body, .. } = &mut reply.outcome
        && !kept.uid.is_empty()
        && kept.uid != uid
    {
        *body = replace_quoted(body, &kept.uid, uid);
    }
    reply
}

/// `"from"` replaced by `"to"` everywhere in `bytes`.
fn replace_quoted(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    let from = format!("\"{from}\"");
    let to = format!("\"{to}\"");
    let mut out = Vec::with_capacity(bytes.len() + to.len());
    let mut rest = bytes;
    while let Some(i) = find(rest, from.as_bytes()) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(to.as_bytes());
        rest = &rest[i + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    let first = needle[0];
    let mut start = 0;
    while let Some(p) = hay[start..=hay.len() - needle.len()]
        .iter()
        .position(|b| *b == first)
    {
        let i = start + p;
        if &hay[i..i + needle.len()] == needle {
            return Some(i);
        }
        start = i + 1;
    }
    None
}

/// The identity of a call's content: who is called, how, and the AdmissionReview with its
/// `request.uid` left out.
pub fn call_key(call: &WebhookCall) -> ContentHash {
    let mut h = Hasher128::new();
    h.write(match call.phase {
        WebhookKind::Mutating => b"m",
        WebhookKind::Validating => b"v",
    });
    h.write(call.configuration.as_bytes());
    h.write(call.webhook.as_bytes());
    let e = &call.endpoint;
    h.write(e.url.as_bytes());
    h.write(e.server_name.as_bytes());
    h.write(&e.port.to_be_bytes());
    h.write(e.auth_target.as_bytes());
    h.write(&[u8::from(e.http2)]);
    match &call.ca_bundle {
        Some(ca) => h.write(ca),
        None => h.write(b"\0system roots"),
    }
    h.write(call.review_version.as_bytes());
    let uid = format!("\"{}\"", call.request_uid);
    let mut rest = &call.body[..];
    if !call.request_uid.is_empty() {
        while let Some(i) = find(rest, uid.as_bytes()) {
            h.write(&rest[..i]);
            rest = &rest[i + uid.len()..];
        }
    }
    h.write(rest);
    h.finish()
}

/// A replier that answers calls from a [`ReplyCache`] when it can and forwards the others to
/// `inner` (HTTPS, a recording, a script, the demo), keeping their replies. Clones share the
/// cache.
#[derive(Debug, Clone)]
pub struct ReusingReplier<R> {
    inner: R,
    cache: ReplyCache,
}

impl<R> ReusingReplier<R> {
    /// Wraps `inner`, reading and filling `cache`.
    pub fn new(inner: R, cache: ReplyCache) -> Self {
        Self { inner, cache }
    }

    /// The cache.
    pub fn cache(&self) -> &ReplyCache {
        &self.cache
    }

    /// The wrapped replier.
    pub fn inner(&self) -> &R {
        &self.inner
    }
}

impl<R: Replier + Send> Replier for ReusingReplier<R> {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let since = self.cache.epoch();
        let keys: Vec<ContentHash> = calls.iter().map(call_key).collect();
        let mut out: Vec<Option<Reply>> = calls
            .iter()
            .zip(&keys)
            .map(|(c, k)| self.cache.lookup_key(*k, c))
            .collect();
        let misses: Vec<usize> = (0..calls.len()).filter(|i| out[*i].is_none()).collect();
        let cache = self.cache.clone();
        let inner = &mut self.inner;
        async move {
            if !misses.is_empty() {
                let subset: Vec<WebhookCall>;
                let forwarded: &[WebhookCall] = if misses.len() == calls.len() {
                    calls
                } else {
                    subset = misses.iter().map(|i| calls[*i].clone()).collect();
                    &subset
                };
                let replies = inner.reply(forwarded).await;
                for ((i, call), reply) in misses.iter().zip(forwarded).zip(replies) {
                    cache.insert_key(since, keys[*i], call, &reply);
                    out[*i] = Some(reply);
                }
            }
            out.into_iter()
                .map(|r| {
                    r.unwrap_or(Reply {
                        outcome: ReplyOutcome::Canceled,
                        elapsed: std::time::Duration::ZERO,
                    })
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_uid_is_replaced() {
        let body = br#"{"response":{"uid":"a-1","allowed":true},"x":"a-12"}"#;
        let out = replace_quoted(body, "a-1", "b-2");
        assert_eq!(
            out,
            br#"{"response":{"uid":"b-2","allowed":true},"x":"a-12"}"#
        );
        assert_eq!(find(b"abc", b"c"), Some(2));
        assert_eq!(find(b"ab", b"abc"), None);
    }
}
