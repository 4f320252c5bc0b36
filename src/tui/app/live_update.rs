//! How the one update follows a live cluster: its messages, the live actions that reach
//! beyond the live state (another context, opening and copying what the live views select),
//! and `:apply`.

use serde_json::Value;

use super::{ChainPane, Command, State, View};
use crate::api::WebhookConfiguration;
use crate::live::cluster::{AdmissionKind, ClusterMsg, Served};
use crate::tui::keymap::Action;
use crate::tui::live::{
    ApplyRequest, ApplyResult, DEFAULT_KEEP_EVENTS, LiveAnnotation, LiveMsg, LiveState,
    PendingApply, clock,
};
use crate::tui::model::HookCounts;

impl State {
    /// Takes in a message of the live source.
    pub(in crate::tui) fn on_live(&mut self, msg: LiveMsg) -> Vec<Command> {
        let live = self.live.get_or_insert_with(|| {
            Box::new(LiveState::new("live".into(), DEFAULT_KEEP_EVENTS, false))
        });
        match msg {
            LiveMsg::Cluster { msg, at } => {
                // The status bar says the latest of the connection: a failure, and once
                // connected again, that (replacing the failure).
                let said = match msg.as_ref() {
                    ClusterMsg::Failed(f) => Some((format!("cluster: {}", f.reason), true)),
                    ClusterMsg::Connected(c)
                        if self
                            .message
                            .as_ref()
                            .is_some_and(|(m, error)| *error && m.starts_with("cluster: ")) =>
                    {
                        Some((
                            format!(
                                "cluster: connected again to {} at {}",
                                c.info.server,
                                clock(at)
                            ),
                            false,
                        ))
                    }
                    // Said once, as kubectl would find them absent; again only if the server
                    // changes what it serves.
                    ClusterMsg::Discovered(served) => {
                        // A policy kind stands for its binding kind, served with it.
                        let absent = |s: &[Served]| {
                            let gone = |k| s.iter().any(|s| s.kind == k && s.version.is_none());
                            [
                                AdmissionKind::ValidatingAdmissionPolicy,
                                AdmissionKind::MutatingAdmissionPolicy,
                                AdmissionKind::ValidatingAdmissionPolicyBinding,
                                AdmissionKind::MutatingAdmissionPolicyBinding,
                            ]
                            .into_iter()
                            .filter(|k| gone(*k))
                            .filter(|k| match k {
                                AdmissionKind::ValidatingAdmissionPolicyBinding => {
                                    !gone(AdmissionKind::ValidatingAdmissionPolicy)
                                }
                                AdmissionKind::MutatingAdmissionPolicyBinding => {
                                    !gone(AdmissionKind::MutatingAdmissionPolicy)
                                }
                                _ => true,
                            })
                            .map(AdmissionKind::kind)
                            .collect::<Vec<_>>()
                        };
                        let now = absent(served);
                        let before = live.served.as_deref().map(absent);
                        (!now.is_empty() && before.as_ref() != Some(&now)).then(|| {
                            let text = format!("{} not served here: not watched", now.join(", "));
                            (format!("cluster: {text}"), false)
                        })
                    }
                    _ => None,
                };
                live.on_cluster(*msg, at);
                if let Some((text, error)) = said {
                    self.say(text, error);
                }
            }
            LiveMsg::Configurations {
                hooks,
                configurations,
                policies,
                bindings,
                unreadable,
                problems,
                synced,
                documents,
            } => {
                live.configurations = configurations;
                live.policies = policies;
                live.bindings = bindings;
                live.unreadable = unreadable;
                live.synced = synced;
                live.configuration_problems = problems;
                let mut commands = self.sync_cluster_documents(documents);
                if self.live_edited() {
                    // The source dispatches with the cluster's set again; the edits stay in force.
                    self.edit_generation += 1;
                    commands.push(Command::Redispatch {
                        generation: self.edit_generation,
                        configurations: self.configurations_in_force(),
                        policies: self.policies_in_force(),
                        fresh: false,
                    });
                    return commands;
                }
                self.hooks = hooks;
                self.hook_cursor.selected = self
                    .hook_cursor
                    .selected
                    .min(self.hooks.len().saturating_sub(1));
                self.hook_counts = vec![HookCounts::default(); self.hooks.len()];
                let entries = std::mem::take(&mut self.entries);
                for e in &entries {
                    self.count_calls(&e.replayed);
                }
                self.entries = entries;
                return commands;
            }
            LiveMsg::Applied(result) => return self.applied(*result),
            LiveMsg::Params { objects, at } => live.params = Some((objects, at)),
            LiveMsg::Scrape { at, snapshot } => {
                if let Err(e) = live.on_scrape(at, *snapshot) {
                    self.say(e, true);
                }
            }
            LiveMsg::Audit(record) => live.on_audit(*record),
            LiveMsg::AuditNotice { text, at } => live.on_notice(text, at),
            LiveMsg::Release(server) => {
                // The status bar names the release modelled, and a server newer (or older) than
                // any hookscope models.
                self.kube_version = if server.exact() {
                    server.modelled.to_string()
                } else {
                    match server.minor {
                        Some(m) if m > server.modelled.minor() => format!(
                            "{} (server {} is newer than hookscope models)",
                            server.modelled, server.git_version
                        ),
                        Some(_) => format!(
                            "{} (server {} is older than hookscope models)",
                            server.modelled, server.git_version
                        ),
                        None => format!("{} (server {:?})", server.modelled, server.git_version),
                    }
                };
                live.release = Some(server);
            }
        }
        Vec::new()
    }

    /// After a replayed result arrived: open it when the user replayed one event.
    pub(in crate::tui) fn open_live_replay(&mut self) {
        if let Some(live) = self.live.as_mut()
            && live.open_next_replay
        {
            live.open_next_replay = false;
            let last = self.entries.len().saturating_sub(1);
            self.requests.focus(last);
            self.chain.compare = false;
            self.view = View::Chain;
            self.chain.pane = ChainPane::Grid;
            self.reset_chain();
        }
    }

    /// The live actions: chart window and pause, the Events filter, the namespace and noise
    /// shown, replays of audit events, another context.
    pub(in crate::tui) fn live_action(&mut self, action: Action) -> Vec<Command> {
        let Some(live) = self.live.as_mut() else {
            self.say("only a live cluster has this (hookscope live)", true);
            return Vec::new();
        };
        match action {
            Action::Context(name) => {
                // What the console knows of the previous cluster goes; the audit events, from a
                // source of their own, stay.
                let summary = match live.summary.split_once(" · ") {
                    Some((_, rest)) => format!("context {name} · {rest}"),
                    None => format!("context {name}"),
                };
                let mut fresh = LiveState::new(summary, live.keep_events, live.allow_writes);
                fresh.events = std::mem::take(&mut live.events);
                fresh.annotations = std::mem::take(&mut live.annotations);
                fresh.first_event = live.first_event;
                fresh.events_seen = live.events_seen;
                fresh.notices = std::mem::take(&mut live.notices);
                fresh.namespace = live.namespace.take();
                fresh.events_view.filter = std::mem::take(&mut live.events_view.filter);
                fresh.show_noise = live.show_noise;
                **live = fresh;
                // The previous cluster's configurations close with it, unless edited (the edits
                // stay, as what-ifs on the next cluster).
                self.buffers.retain(|b| {
                    !matches!(b.origin, crate::tui::editing::BufferOrigin::Cluster { .. })
                        || b.modified()
                });
                self.buffer = self.buffer.min(self.buffers.len().saturating_sub(1));
                self.say(format!("connecting to context {name}…"), false);
                vec![Command::Context(name)]
            }
            action => {
                let Some(taken) = live.action(action) else {
                    return Vec::new();
                };
                if taken.annotations_changed {
                    self.annotations_view.cursor = Default::default();
                }
                if let Some((text, error)) = taken.note {
                    self.say(text, error);
                }
                if taken.replay.is_empty() {
                    Vec::new()
                } else {
                    vec![Command::Replay(taken.replay)]
                }
            }
        }
    }

    /// The live annotation the Annotations view selects (`j`/`k` move it), else the newest.
    pub fn selected_live_annotation(&self) -> Option<&LiveAnnotation> {
        let live = self.live.as_deref()?;
        let shown: Vec<&LiveAnnotation> = self.visible_live_annotations(live).collect();
        match self.annotations_view.cursor.selected {
            Some(i) => shown.get(i.min(shown.len().saturating_sub(1))).copied(),
            None => shown.last().copied(),
        }
    }

    /// `enter` in the live Annotations view: the selected annotation's event in the Events view,
    /// whose detail shows every annotation of it decoded in full.
    pub(in crate::tui) fn open_live_annotation(&mut self) -> Vec<Command> {
        let Some(event) = self.selected_live_annotation().map(|a| a.event) else {
            self.say("no annotation to open", true);
            return Vec::new();
        };
        if let Some(live) = self.live.as_deref_mut() {
            live.events_view.selected = Some(event);
        }
        self.view = View::Events;
        Vec::new()
    }

    /// `y` in the live Annotations view: copies the selected annotation's value in full,
    /// decoded as the views show it; a Secret's patch stays masked unless revealed.
    pub(in crate::tui) fn copy_live_annotation(&mut self) -> Vec<Command> {
        let picked = self.selected_live_annotation().map(|a| {
            let resource = self
                .live
                .as_deref()
                .and_then(|l| l.event(a.event))
                .map(|e| e.resource.clone())
                .unwrap_or_default();
            (a.key.clone(), a.value.clone(), resource)
        });
        let Some((key, value, resource)) = picked else {
            self.say("no annotation to copy", true);
            return Vec::new();
        };
        let (text, masked) =
            crate::tui::view::annotation_text(&resource, &key, &value, self.reveal_secrets);
        if masked {
            self.say("a Secret's patch: :reveal shows it, then y copies it", true);
            return Vec::new();
        }
        use base64::Engine as _;
        let payload = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        self.say(format!("copied {key} ({} bytes)", text.len()), false);
        vec![Command::Clipboard(payload)]
    }

    /// Rows of the Annotations view: the live stream's, or the replay's.
    pub(in crate::tui) fn annotation_count(&self) -> usize {
        match &self.live {
            Some(l) => self.visible_live_annotations(l).count(),
            None => self.visible_annotations().len(),
        }
    }

    /// The live annotations the filter lets through.
    pub fn visible_live_annotations<'a>(
        &'a self,
        live: &'a LiveState,
    ) -> impl Iterator<Item = &'a LiveAnnotation> + 'a {
        let f = self.annotations_view.filter.to_lowercase();
        live.annotations.iter().filter(move |a| {
            (live.namespace.is_none() || live.event(a.event).is_some_and(|e| live.shows(e)))
                && (f.is_empty()
                    || a.key.to_lowercase().contains(&f)
                    || a.value.to_lowercase().contains(&f)
                    || live
                        .event(a.event)
                        .is_some_and(|e| e.target.to_lowercase().contains(&f)))
        })
    }
}

/// The edit of each configuration of buffer `b`: the object as its text writes it, and, for a
/// buffer of a cluster's configuration, the cluster's version the edit was made on (`saved`:
/// what was loaded, or what `:rebase` put the edit on).
fn edits_of(
    b: &crate::tui::editing::Buffer,
    configurations: &[WebhookConfiguration],
) -> Vec<crate::live::cluster::Edit> {
    use crate::live::cluster::Edit;
    let docs: Vec<Value> = crate::yaml::from_multiple(&b.text()).unwrap_or_default();
    let base = match &b.origin {
        crate::tui::editing::BufferOrigin::Cluster { .. } => {
            crate::yaml::from_str::<Value>(&b.saved).ok()
        }
        _ => None,
    };
    configurations
        .iter()
        .map(|c| {
            let same = |d: &Value| {
                d["metadata"]["name"] == c.name.as_str() && d["kind"] == c.kind.configuration_kind()
            };
            match docs.iter().find(|d| same(d)) {
                Some(ours) => Edit {
                    kind: c.kind.into(),
                    name: c.name.clone(),
                    api_version: c.api_version.clone(),
                    base: base.clone().filter(|b| same(b)),
                    ours: ours.clone(),
                },
                None => Edit::from_configuration(c),
            }
        })
        .collect()
}

/// The edit of each admission policy and binding in force in buffer `b`, as its text writes it
/// (not defaulted), with the cluster's version it was made on for a buffer of the cluster's
/// object (see [`edits_of`]).
fn policy_edits_of(b: &crate::tui::editing::Buffer) -> Vec<crate::live::cluster::Edit> {
    use crate::live::cluster::Edit;
    if b.policies_in_force.is_empty() {
        return Vec::new();
    }
    let docs: Vec<Value> = crate::yaml::from_multiple(&b.text()).unwrap_or_default();
    let base = match &b.origin {
        crate::tui::editing::BufferOrigin::Cluster { .. } => {
            crate::yaml::from_str::<Value>(&b.saved).ok()
        }
        _ => None,
    };
    b.policies_in_force
        .iter()
        .filter_map(|p| {
            let same = |d: &Value| d["metadata"]["name"] == p.name() && d["kind"] == p.kind();
            let doc = docs.iter().find(|d| same(d))?;
            Edit::from_document(doc, base.clone().filter(|b| same(b)))
        })
        .collect()
}

impl State {
    /// `:apply` (`force`: `:apply!`): a server-side dry run of the current buffer's
    /// configurations, shown for confirmation before anything is stored.
    pub(in crate::tui) fn apply_to_cluster(&mut self, force: bool) -> Vec<Command> {
        let Some(live) = self.live.as_deref() else {
            self.say(
                "only a live cluster takes :apply (hookscope live --allow-writes)",
                true,
            );
            return Vec::new();
        };
        if !live.allow_writes {
            self.say(
                "read-only: hookscope live changes the cluster only when started with --allow-writes",
                true,
            );
            return Vec::new();
        }
        let i = match self.buffer_for(None) {
            Ok((i, _)) => i,
            Err(e) => {
                self.say(e, true);
                return Vec::new();
            }
        };
        let b = &self.buffers[i];
        let mut commands = self.check_due(i, b.generation);
        let b = &self.buffers[i];
        if let Some(first) = b.check.errors.first() {
            let text = format!(
                "{} has {} error(s) (line {}: {}): nothing is applied",
                b.origin.label(),
                b.check.errors.len(),
                first.line,
                first.message
            );
            self.say(text, true);
            return commands;
        }
        if b.in_force.is_empty() && b.policies_in_force.is_empty() {
            let text = format!("{} defines no configuration to apply", b.origin.label());
            self.say(text, true);
            return commands;
        }
        // What the user wrote, not defaulted: server-side apply makes hookscope the manager
        // of every field it sends, so defaults stay the server's.
        let written: Vec<WebhookConfiguration> =
            crate::config::parse_documents(&b.text(), &b.origin.label())
                .into_iter()
                .filter_map(Result::ok)
                .map(|l| l.configuration)
                .collect();
        let configurations = if written.len() == b.in_force.len() {
            written
        } else {
            b.in_force.clone()
        };
        let mut edits = edits_of(b, &configurations);
        edits.extend(policy_edits_of(b));
        let names: Vec<&str> = edits.iter().map(|e| e.name.as_str()).collect();
        let text = format!(
            "server-side dry run of {}{}…",
            names.join(", "),
            if force { " (force)" } else { "" },
        );
        commands.push(Command::Apply(ApplyRequest {
            buffer: i,
            configurations,
            edits,
            dry_run: true,
            force,
        }));
        self.say(text, false);
        commands
    }

    /// What the live source answered to an apply or its dry run.
    fn applied(&mut self, result: ApplyResult) -> Vec<Command> {
        let ApplyResult { request, outcomes } = result;
        let failures: Vec<String> = outcomes
            .iter()
            .filter_map(|o| o.result.as_ref().err().map(|e| format!("{}: {e}", o.name)))
            .collect();
        let what = if request.dry_run { "dry run" } else { "apply" };
        if !failures.is_empty() {
            let hint = if !request.force && failures.iter().any(|f| f.contains("409 Conflict")) {
                "\n:apply! takes the conflicting fields over (force)."
            } else {
                ""
            };
            let report = format!(
                "The {what} was refused; nothing changed.\n\n{}\n{hint}",
                failures.join("\n\n")
            );
            if let Some(live) = self.live.as_deref_mut() {
                live.pending_apply = Some(PendingApply {
                    request: None,
                    diff: report,
                    scroll: 0,
                });
            }
            self.mode = super::Mode::ConfirmApply;
            let text = if hint.is_empty() {
                format!("{what} refused: see why (esc closes)")
            } else {
                format!("{what} refused: a conflict (esc closes; :apply! takes the fields over)")
            };
            self.say(text, true);
            return Vec::new();
        }
        if request.dry_run {
            let diff: String = outcomes
                .iter()
                .filter_map(|o| o.result.as_ref().ok().map(|(_, d)| d.as_str()))
                .collect();
            if let Some(live) = self.live.as_deref_mut() {
                live.pending_apply = Some(PendingApply {
                    request: Some(ApplyRequest {
                        dry_run: false,
                        ..request
                    }),
                    diff,
                    scroll: 0,
                });
            }
            let takes_over = outcomes
                .iter()
                .filter_map(|o| o.result.as_ref().ok())
                .any(|(_, d)| d.contains("# force takes these fields over"));
            self.mode = super::Mode::ConfirmApply;
            self.say(
                if takes_over {
                    "the server's dry run: y applies it, taking over from their managers only the fields listed (force), n cancels"
                } else {
                    "the server's dry run: y applies it to the cluster, n cancels"
                },
                false,
            );
            return Vec::new();
        }
        let mut applied = Vec::new();
        for o in &outcomes {
            let Ok((object, _)) = &o.result else {
                continue;
            };
            let version = object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("?");
            applied.push(format!("{} (resourceVersion {version})", o.name));
            // The buffer now shows what the cluster stores, and has no edits.
            let origin = crate::tui::editing::BufferOrigin::Cluster {
                kind: o.kind,
                name: o.name.clone(),
            };
            if let Some(b) = self.buffers.iter_mut().find(|b| b.origin == origin) {
                let text = crate::live::cluster::editable_yaml(object);
                b.replace_text(&text);
                b.saved = text;
                b.disk_changed = None;
            }
        }
        self.say(format!("applied {}", applied.join(", ")), false);
        Vec::new()
    }

    /// A key while a dry run waits for confirmation.
    pub(in crate::tui) fn confirm_key(&mut self, key: crossterm::event::KeyEvent) -> Vec<Command> {
        use crossterm::event::KeyCode;
        let Some(live) = self.live.as_deref_mut() else {
            return Vec::new();
        };
        let Some(pending) = live.pending_apply.as_mut() else {
            return Vec::new();
        };
        let lines = pending.diff.lines().count() as u16;
        let page = u16::try_from(self.page).unwrap_or(u16::MAX);
        match key.code {
            KeyCode::Char('y') if pending.request.is_some() => {
                let request = live.pending_apply.take().and_then(|p| p.request);
                let names = request
                    .as_ref()
                    .map(|r| {
                        r.edits
                            .iter()
                            .map(|e| e.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                self.say(format!("applying {names}…"), false);
                return request.map(Command::Apply).into_iter().collect();
            }
            KeyCode::Char('n') | KeyCode::Char('q') | KeyCode::Esc => {
                let closed = live.pending_apply.take();
                if closed.is_some_and(|p| p.request.is_some()) {
                    self.say(
                        "apply cancelled: nothing changed, your edits are kept",
                        false,
                    );
                }
                return Vec::new();
            }
            KeyCode::Char('j') | KeyCode::Down => pending.scroll = pending.scroll.saturating_add(1),
            KeyCode::Char('k') | KeyCode::Up => pending.scroll = pending.scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => {
                pending.scroll = pending.scroll.saturating_add(page)
            }
            KeyCode::PageUp => pending.scroll = pending.scroll.saturating_sub(page),
            _ => {}
        }
        pending.scroll = pending.scroll.min(lines.saturating_sub(1));
        self.mode = super::Mode::ConfirmApply;
        Vec::new()
    }
}
