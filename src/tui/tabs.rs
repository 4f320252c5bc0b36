//! The console's views by name: their titles and their tab order.

/// The views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    /// Every replayed request.
    Requests,
    /// The chain of the selected request, step by step.
    Chain,
    /// Audit annotations as they are written.
    Annotations,
    /// The webhook metrics.
    Metrics,
    /// The configurations in dispatch order.
    Webhooks,
    /// The configuration being edited.
    Editor,
    /// What the edits changed.
    WhatIf,
    /// A live cluster: the connection, the feeds and the history of configuration changes.
    Cluster,
    /// A live cluster's audit events, replayable on demand.
    Events,
    /// What could not be replayed or loaded (`:problems`; no tab of its own).
    Problems,
}

impl View {
    /// In tab order.
    pub const ALL: [View; 7] = [
        View::Requests,
        View::Chain,
        View::Annotations,
        View::Metrics,
        View::Webhooks,
        View::Editor,
        View::WhatIf,
    ];

    /// The views of a live cluster, after [`View::ALL`] in tab order (`hookscope live`).
    pub const LIVE: [View; 2] = [View::Cluster, View::Events];

    /// Title.
    pub fn title(self) -> &'static str {
        match self {
            View::Requests => "Requests",
            View::Chain => "Chain",
            View::Annotations => "Annotations",
            View::Metrics => "Metrics",
            View::Webhooks => "Webhooks",
            View::Editor => "Edit",
            View::WhatIf => "What-if",
            View::Cluster => "Cluster",
            View::Events => "Events",
            View::Problems => "Problems",
        }
    }
}
