//! The agent's metrics: a few instruments, aggregated in-process (cumulative, as OTLP's
//! default temporality has it) and read by the exporter at each export.
//!
//! Token usage and operation duration are the GenAI semantic conventions' client metrics;
//! the others are ours (`agentao.*`). Recording takes one short lock; nothing here waits on the
//! network.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

/// One instrument of the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Instrument {
    /// `gen_ai.client.token.usage`: tokens per model call, by `gen_ai.token.type`.
    TokenUsage,
    /// `gen_ai.client.operation.duration`: seconds per model call attempt.
    OperationDuration,
    /// `agentao.turn.duration`: seconds per turn, by its status.
    TurnDuration,
    /// `agentao.tool.duration`: seconds per tool call, by tool and status.
    ToolDuration,
    /// `agentao.permission.decisions`: permission decisions, by outcome.
    PermissionDecisions,
    /// `agentao.errors`: failed model calls, tools and turns, by `error.type`.
    Errors,
    /// `agentao.telemetry.spans_dropped`: spans the exporter could not keep or deliver.
    SpansDropped,
}

/// How an instrument aggregates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Aggregation {
    Sum,
    Histogram(&'static [f64]),
}

/// The GenAI conventions' advised buckets for token counts.
const TOKEN_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// The GenAI conventions' advised buckets for durations in seconds.
const SECONDS_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

impl Instrument {
    pub const ALL: [Instrument; 7] = [
        Instrument::TokenUsage,
        Instrument::OperationDuration,
        Instrument::TurnDuration,
        Instrument::ToolDuration,
        Instrument::PermissionDecisions,
        Instrument::Errors,
        Instrument::SpansDropped,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Instrument::TokenUsage => "gen_ai.client.token.usage",
            Instrument::OperationDuration => "gen_ai.client.operation.duration",
            Instrument::TurnDuration => "agentao.turn.duration",
            Instrument::ToolDuration => "agentao.tool.duration",
            Instrument::PermissionDecisions => "agentao.permission.decisions",
            Instrument::Errors => "agentao.errors",
            Instrument::SpansDropped => "agentao.telemetry.spans_dropped",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Instrument::TokenUsage => "{token}",
            Instrument::OperationDuration | Instrument::TurnDuration | Instrument::ToolDuration => {
                "s"
            }
            Instrument::PermissionDecisions => "{decision}",
            Instrument::Errors => "{error}",
            Instrument::SpansDropped => "{span}",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Instrument::TokenUsage => "Tokens used per model call",
            Instrument::OperationDuration => "Duration of one model call attempt",
            Instrument::TurnDuration => "Duration of one turn",
            Instrument::ToolDuration => "Duration of one tool call",
            Instrument::PermissionDecisions => "Permission decisions, by outcome",
            Instrument::Errors => "Failed model calls, tool calls and turns",
            Instrument::SpansDropped => {
                "Spans dropped: the export queue was full or the collector failed"
            }
        }
    }

    pub fn aggregation(self) -> Aggregation {
        match self {
            Instrument::TokenUsage => Aggregation::Histogram(TOKEN_BUCKETS),
            Instrument::OperationDuration | Instrument::TurnDuration | Instrument::ToolDuration => {
                Aggregation::Histogram(SECONDS_BUCKETS)
            }
            Instrument::PermissionDecisions | Instrument::Errors | Instrument::SpansDropped => {
                Aggregation::Sum
            }
        }
    }
}

/// The attributes of one series, in a fixed order.
pub type SeriesKey = Vec<(&'static str, String)>;

/// One series' aggregate so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Aggregate {
    Sum(u64),
    Histogram {
        count: u64,
        sum: f64,
        min: f64,
        max: f64,
        /// One count per bucket bound, and one more above the last.
        bucket_counts: Vec<u64>,
        bounds: &'static [f64],
    },
}

/// Every series of every instrument of one pipeline.
#[derive(Debug)]
pub struct Metrics {
    pub(crate) start: SystemTime,
    series: Mutex<BTreeMap<(Instrument, SeriesKey), Aggregate>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            start: SystemTime::now(),
            series: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Metrics {
    /// Adds `value` to a sum, or records it in a histogram.
    pub(crate) fn record(&self, instrument: Instrument, value: f64, key: SeriesKey) {
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let agg =
            series
                .entry((instrument, key))
                .or_insert_with(|| match instrument.aggregation() {
                    Aggregation::Sum => Aggregate::Sum(0),
                    Aggregation::Histogram(bounds) => Aggregate::Histogram {
                        count: 0,
                        sum: 0.0,
                        min: f64::INFINITY,
                        max: f64::NEG_INFINITY,
                        bucket_counts: vec![0; bounds.len() + 1],
                        bounds,
                    },
                });
        match agg {
            Aggregate::Sum(n) => *n = n.saturating_add(value.max(0.0) as u64),
            Aggregate::Histogram {
                count,
                sum,
                min,
                max,
                bucket_counts,
                bounds,
            } => {
                *count += 1;
                *sum += value;
                *min = min.min(value);
                *max = max.max(value);
                let i = bounds
                    .iter()
                    .position(|b| value <= *b)
                    .unwrap_or(bounds.len());
                bucket_counts[i] += 1;
            }
        }
    }

    /// Every series now, for an export.
    pub(crate) fn snapshot(&self) -> Vec<(Instrument, SeriesKey, Aggregate)> {
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        series
            .iter()
            .map(|((i, k), a)| (*i, k.clone(), a.clone()))
            .collect()
    }

    /// The sum of one instrument's series.
    #[cfg(test)]
    pub(crate) fn sum(&self, instrument: Instrument) -> u64 {
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        series
            .iter()
            .filter(|((i, _), _)| *i == instrument)
            .map(|(_, a)| match a {
                Aggregate::Sum(n) => *n,
                Aggregate::Histogram { count, .. } => *count,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_count_into_their_buckets_and_sums_add() {
        let m = Metrics::default();
        let key = || vec![("gen_ai.token.type", "input".to_owned())];
        m.record(Instrument::TokenUsage, 3.0, key());
        m.record(Instrument::TokenUsage, 5000.0, key());
        m.record(Instrument::PermissionDecisions, 1.0, vec![]);
        m.record(Instrument::PermissionDecisions, 1.0, vec![]);
        let snap = m.snapshot();
        assert_eq!(snap.len(), 2);
        match &snap[0].2 {
            Aggregate::Histogram {
                count,
                sum,
                min,
                max,
                bucket_counts,
                ..
            } => {
                assert_eq!((*count, *sum, *min, *max), (2, 5003.0, 3.0, 5000.0));
                assert_eq!(bucket_counts[1], 1, "3 is in (1, 4]");
                assert_eq!(bucket_counts[7], 1, "5000 is in (4096, 16384]");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(snap[1].2, Aggregate::Sum(2));
        assert_eq!(m.sum(Instrument::PermissionDecisions), 2);
    }
}
