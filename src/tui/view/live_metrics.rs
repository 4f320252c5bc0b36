//! The Metrics view of a live cluster: the apiserver's admission webhook series from its
//! `/metrics` scrapes, and its admission policy series once there are any, as rates from counter
//! deltas and quantiles from histogram buckets, over a time window that `+`/`-` zoom and `p`
//! pauses.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::table::{Column, Laid, TableRow};
use super::{clip, pane, style};
use crate::live::metrics::{AdmissionFamily, LabelSet, RateSeries, Window};
use crate::tui::app::State;
use crate::tui::live::{LiveState, WINDOWS, clock, window_label};
use crate::tui::theme::StyleKey;
use ratatui::style::Style;

/// Series drawn per chart (the largest increases); the rest are summed in the legend count.
const SERIES_DRAWN: usize = 6;

/// Draws the view.
pub fn render(frame: &mut Frame, state: &State, area: Rect) {
    let Some(live) = state.live.as_deref() else {
        return;
    };
    let window = live.chart_window();
    let length = WINDOWS[live.window.min(WINDOWS.len() - 1)];
    let when = match live.paused_at {
        Some(at) => format!("paused at {} (p follows)", clock(at)),
        None => match live.history.latest() {
            Some((at, _)) => format!("to {} (p pauses)", clock(at)),
            None => "no scrape yet".into(),
        },
    };
    let instances = live.history.instances();
    let which = match (&live.instance, instances.len()) {
        (Some(i), _) => format!(" · apiserver {i} alone (i: next)"),
        (None, 0) => String::new(),
        (None, n) => format!(" · sum of {n} apiservers (i: one alone)"),
    };
    let span = format!(
        "last {} {when} · + zooms in, - out · {} scrapes{which}",
        window_label(length),
        live.history.len()
    );
    // The policy row only when the cluster has counted a policy check: a cluster without
    // policies keeps the room for its webhooks.
    let policies = policy_series(live, &window);
    let [header, charts, policy_row, tables] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(if policies.is_some() { 30 } else { 55 }),
        Constraint::Percentage(if policies.is_some() { 40 } else { 0 }),
        Constraint::Min(6),
    ])
    .areas(area);
    frame.render_widget(
        Paragraph::new(Line::styled(
            format!(" {span}"),
            style(state, StyleKey::Muted),
        )),
        header,
    );
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts);
    let rejections = live.history.rates(
        &window,
        AdmissionFamily::WebhookRejections,
        &["name", "error_type"],
    );
    rate_chart(
        frame,
        state,
        left,
        " rejections/s by webhook, error_type · count in the window ",
        rejections,
        (length.as_secs_f64(), values),
    );
    let requests = live
        .history
        .rates(&window, AdmissionFamily::WebhookRequests, &["name", "code"]);
    rate_chart(
        frame,
        state,
        right,
        " requests/s by webhook, code · count in the window ",
        requests,
        (length.as_secs_f64(), values),
    );
    if let Some(checks) = policies {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(policy_row);
        rate_chart(
            frame,
            state,
            left,
            " policy checks/s by policy/binding, action · count in the window ",
            checks,
            (length.as_secs_f64(), policy_label),
        );
        policy_latency(frame, state, live, &window, right);
    }
    let [latency, totals] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(tables);
    latency_table(frame, state, live, &window, latency);
    totals_pane(frame, state, live, &window, totals);
}

/// A series' label: its label values in label-name order.
fn values(labels: &LabelSet) -> String {
    labels
        .pairs()
        .iter()
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A policy check series' label: `policy/binding action`, the error type when there is one
/// (a mutating policy's checks say `mutate`).
fn policy_label(labels: &LabelSet) -> String {
    let get = |name| labels.get(name).unwrap_or("");
    let error = match get("error_type") {
        "" | "no_error" => String::new(),
        e => format!(" {e}"),
    };
    format!(
        "{}/{} {}{error}",
        get("policy"),
        get("policy_binding"),
        labels.get("enforcement_action").unwrap_or("mutate")
    )
}

/// The admission policy check series of the window (validating, then mutating), grouped by
/// policy, binding, action and error type; None when the cluster has counted none.
fn policy_series(live: &LiveState, window: &Window) -> Option<Vec<RateSeries>> {
    let mut series = live.history.rates(
        window,
        AdmissionFamily::PolicyChecks,
        &[
            "policy",
            "policy_binding",
            "enforcement_action",
            "error_type",
        ],
    );
    series.extend(live.history.rates(
        window,
        AdmissionFamily::MutatingPolicyChecks,
        &["policy", "policy_binding", "error_type"],
    ));
    (!series.is_empty()).then_some(series)
}

fn rate_chart(
    frame: &mut Frame,
    state: &State,
    area: Rect,
    title: &'static str,
    mut series: Vec<RateSeries>,
    (length, label_of): (f64, fn(&LabelSet) -> String),
) {
    let block = pane(state, title, false);
    if series.iter().all(|s| s.points.is_empty()) {
        let p = Paragraph::new(Line::styled(
            "Two scrapes are needed for a rate.",
            style(state, StyleKey::Muted),
        ))
        .block(block);
        frame.render_widget(p, area);
        return;
    }
    series.sort_by(|a, b| b.increase.total_cmp(&a.increase));
    let hidden = series.len().saturating_sub(SERIES_DRAWN);
    series.truncate(SERIES_DRAWN);
    // The legend is drawn only within two thirds of the chart: labels are cut to fit there.
    let longest = (usize::from(area.width) * 2 / 3).saturating_sub(16).max(16);
    let data: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|s| {
            let label = label_of(&s.labels);
            let points = s.points.iter().map(|p| (p.offset_secs, p.value)).collect();
            // The count over the window beside the rate (a counter's increase is whole).
            (
                format!("{} · {:.0}", clip(&label, longest), s.increase),
                points,
            )
        })
        .collect();
    let max = data
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, v)| *v))
        .fold(0.0_f64, f64::max)
        .max(0.001);
    let x_label = format!(
        "-{}",
        window_label(std::time::Duration::from_secs_f64(length))
    );
    let mut block = block;
    if hidden > 0 {
        block = block.title_bottom(format!(" +{hidden} smaller series "));
    }
    let chart = super::line_chart(
        state,
        block,
        &data,
        ([-length, 0.0], [x_label, "now".into()]),
        max * 1.1,
        format!("{:.2}", max * 1.1),
    );
    frame.render_widget(chart, area);
}

fn latency_table(
    frame: &mut Frame,
    state: &State,
    live: &LiveState,
    window: &crate::live::metrics::Window,
    area: Rect,
) {
    let series = live.history.quantiles(
        window,
        AdmissionFamily::WebhookDuration,
        &["name", "type"],
        &[0.5, 0.9, 0.99],
    );
    let block = pane(
        state,
        " admission_duration_seconds by webhook (window) ",
        false,
    );
    if series.is_empty() {
        nothing_yet(
            frame,
            state,
            "No webhook latency observed yet.",
            block,
            area,
        );
        return;
    }
    let rows = series
        .iter()
        .map(|s| {
            latency_row(
                s,
                ["name", "type"].map(|k| s.labels.get(k).unwrap_or("")),
                1,
            )
        })
        .collect();
    laid_out_table(frame, state, &LATENCY, rows, block, area);
}

/// The policies' check latency over the window: quantiles from the check duration histograms
/// by policy and binding, validating then mutating.
fn policy_latency(frame: &mut Frame, state: &State, live: &LiveState, window: &Window, area: Rect) {
    let group = ["policy", "policy_binding"];
    let qs = [0.5, 0.9, 0.99];
    let block = pane(state, " check_duration_seconds by policy (window) ", false);
    let rows: Vec<(&str, crate::live::metrics::QuantileSeries)> = [
        (AdmissionFamily::PolicyDuration, "VAP"),
        (AdmissionFamily::MutatingPolicyDuration, "MAP"),
    ]
    .into_iter()
    .flat_map(|(family, kind)| {
        let series = live.history.quantiles(window, family, &group, &qs);
        series.into_iter().map(move |s| (kind, s))
    })
    .collect();
    if rows.is_empty() {
        nothing_yet(
            frame,
            state,
            "No policy check latency observed yet.",
            block,
            area,
        );
        return;
    }
    // Checks take microseconds: milliseconds with three decimals. The buckets are coarse (0.5 µs,
    // then 1 ms), so the quantiles are interpolated within them; the mean (sum / count) is exact.
    let rows = rows
        .iter()
        .map(|(kind, s)| {
            let names = ["policy", "policy_binding"].map(|k| s.labels.get(k).unwrap_or(""));
            latency_row(s, [names[0], names[1], kind], 3)
        })
        .collect();
    laid_out_table(frame, state, &POLICY_LATENCY, rows, block, area);
}

/// A latency table's row: the `names` that identify the series, then its observations, its
/// quantiles and its mean in milliseconds with `decimals`.
fn latency_row<const N: usize>(
    s: &crate::live::metrics::QuantileSeries,
    names: [&str; N],
    decimals: usize,
) -> TableRow {
    let plain = Style::default();
    let ms = |v: Option<f64>| (millis(v, decimals), plain);
    let quantiles = (0..3).map(|i| ms(s.quantiles.get(i).copied()));
    TableRow::new(
        names
            .into_iter()
            .map(|n| (n.to_string(), plain))
            .chain([(format!("{:.0}", s.observations), plain)])
            .chain(quantiles)
            .chain([ms(s.mean)])
            .collect(),
    )
}

/// A latency table laid out over `columns` in `block`.
fn laid_out_table(
    frame: &mut Frame,
    state: &State,
    columns: &[Column],
    rows: Vec<TableRow>,
    block: ratatui::widgets::Block<'_>,
    area: Rect,
) {
    let laid = Laid::new(columns, &rows, area.width.saturating_sub(2));
    let table = laid
        .table(rows, style(state, StyleKey::Header))
        .block(block);
    frame.render_widget(table, area);
}

/// A latency pane with nothing to show yet: `text`, muted, in `block`.
fn nothing_yet(
    frame: &mut Frame,
    state: &State,
    text: &str,
    block: ratatui::widgets::Block<'_>,
    area: Rect,
) {
    let p = Paragraph::new(Line::styled(
        text.to_string(),
        style(state, StyleKey::Muted),
    ))
    .block(block);
    frame.render_widget(p, area);
}

/// Seconds as milliseconds with `decimals`, `–` for no value.
fn millis(seconds: Option<f64>, decimals: usize) -> String {
    match seconds {
        Some(v) if v.is_finite() => format!("{:.decimals$}", v * 1000.0),
        _ => "–".into(),
    }
}

/// The policy latency table's columns.
const POLICY_LATENCY: [Column; 8] = [
    Column::text("POLICY", 10, 12),
    Column::text("BINDING", 8, 12),
    Column::whole("KIND", 3),
    Column::number("CHECKS", 9),
    Column::number("P50 MS", 6).short("P50"),
    Column::number("P90", 4),
    Column::number("P99", 5),
    Column::number("MEAN", 7),
];

/// The latency table's columns.
const LATENCY: [Column; 7] = [
    Column::text("WEBHOOK", 10, 12),
    Column::whole("TYPE", 3),
    Column::number("CALLS", 9),
    Column::number("P50 MS", 8).short("P50"),
    Column::number("P90", 6),
    Column::number("P99", 7),
    Column::number("MEAN", 5),
];

fn totals_pane(
    frame: &mut Frame,
    state: &State,
    live: &LiveState,
    window: &crate::live::metrics::Window,
    area: Rect,
) {
    let mut lines = Vec::new();
    for (family, title, key) in [
        (
            AdmissionFamily::WebhookFailOpen,
            "failed open (increase)",
            StyleKey::FailedOpen,
        ),
        (
            AdmissionFamily::MatchConditionErrors,
            "matchCondition errors",
            StyleKey::Error,
        ),
        (
            AdmissionFamily::MatchConditionExclusions,
            "matchCondition exclusions",
            StyleKey::Muted,
        ),
    ] {
        lines.push(Line::styled(title, style(state, StyleKey::Header)));
        let series = live.history.rates(window, family, &["name"]);
        let mut any = false;
        for s in series.iter().filter(|s| s.increase > 0.0) {
            any = true;
            lines.push(Line::from(vec![
                Span::styled(format!("{:>7.0} ", s.increase), style(state, key)),
                Span::raw(clip(s.labels.get("name").unwrap_or(""), 40)),
            ]));
        }
        if !any {
            lines.push(Line::styled("none", style(state, StyleKey::Muted)));
        }
    }
    frame.render_widget(
        Paragraph::new(lines).block(pane(state, " In the window ", false)),
        area,
    );
}
