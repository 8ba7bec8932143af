//! The OTLP messages of our spans and metrics (the protobuf types of `opentelemetry-proto`),
//! encoded for an OTLP/HTTP `application/x-protobuf` body.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::metrics::v1 as pm;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1 as pt;
use prost::Message;

use super::config::TelemetryConfig;
use super::metrics::{Aggregate, Instrument, SeriesKey};
use super::span::{AttrValue, Attribute, SpanKind, SpanRecord, SpanStatus};

/// The instrumentation scope every span and metric is reported under.
const SCOPE: &str = "libagentao";

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn any_value(v: &AttrValue) -> AnyValue {
    let value = match v {
        AttrValue::Str(s) => any_value::Value::StringValue(s.clone()),
        AttrValue::Int(i) => any_value::Value::IntValue(*i),
        AttrValue::Float(f) => any_value::Value::DoubleValue(*f),
        AttrValue::Bool(b) => any_value::Value::BoolValue(*b),
        AttrValue::StrList(items) => any_value::Value::ArrayValue(ArrayValue {
            values: items
                .iter()
                .map(|s| AnyValue {
                    value: Some(any_value::Value::StringValue(s.clone())),
                })
                .collect(),
        }),
    };
    AnyValue { value: Some(value) }
}

fn key_value(key: &str, value: &AttrValue) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(any_value(value)),
        ..Default::default()
    }
}

fn attributes(attrs: &[Attribute]) -> Vec<KeyValue> {
    attrs.iter().map(|a| key_value(a.key, &a.value)).collect()
}

fn resource(config: &TelemetryConfig) -> Resource {
    let mut attrs = vec![
        key_value(
            "service.name",
            &AttrValue::from(config.service_name.as_str()),
        ),
        key_value("telemetry.sdk.name", &AttrValue::from("libagentao")),
        key_value("telemetry.sdk.language", &AttrValue::from("rust")),
        key_value(
            "telemetry.sdk.version",
            &AttrValue::from(env!("CARGO_PKG_VERSION")),
        ),
    ];
    for (k, v) in &config.resource {
        if k != "service.name" {
            attrs.push(key_value(k, &AttrValue::from(v.as_str())));
        }
    }
    Resource {
        attributes: attrs,
        ..Default::default()
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: SCOPE.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..Default::default()
    }
}

fn span(s: &SpanRecord) -> pt::Span {
    let (code, message) = match &s.status {
        SpanStatus::Unset => (pt::status::StatusCode::Unset, String::new()),
        SpanStatus::Error(m) => (pt::status::StatusCode::Error, m.clone()),
    };
    pt::Span {
        trace_id: s.trace_id.0.to_vec(),
        span_id: s.span_id.0.to_vec(),
        trace_state: s.trace_state.clone(),
        parent_span_id: s.parent_span_id.map(|p| p.0.to_vec()).unwrap_or_default(),
        flags: u32::from(s.flags),
        name: s.name.clone(),
        kind: match s.kind {
            SpanKind::Internal => pt::span::SpanKind::Internal,
            SpanKind::Client => pt::span::SpanKind::Client,
        } as i32,
        start_time_unix_nano: nanos(s.start),
        end_time_unix_nano: nanos(s.end),
        attributes: attributes(&s.attributes),
        events: s
            .events
            .iter()
            .map(|e| pt::span::Event {
                time_unix_nano: nanos(e.time),
                name: e.name.to_owned(),
                attributes: attributes(&e.attributes),
                ..Default::default()
            })
            .collect(),
        status: Some(pt::Status {
            message,
            code: code as i32,
        }),
        ..Default::default()
    }
}

/// The body of one `/v1/traces` request.
pub(crate) fn traces_body(config: &TelemetryConfig, spans: &[SpanRecord]) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: vec![pt::ResourceSpans {
            resource: Some(resource(config)),
            scope_spans: vec![pt::ScopeSpans {
                scope: Some(scope()),
                spans: spans.iter().map(span).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

fn series_attributes(key: &SeriesKey) -> Vec<KeyValue> {
    key.iter()
        .map(|(k, v)| key_value(k, &AttrValue::from(v.as_str())))
        .collect()
}

/// The body of one `/v1/metrics` request: every series, cumulative since `start`.
pub(crate) fn metrics_body(
    config: &TelemetryConfig,
    start: SystemTime,
    series: &[(Instrument, SeriesKey, Aggregate)],
) -> Vec<u8> {
    let now = nanos(SystemTime::now());
    let start = nanos(start);
    let cumulative = pm::AggregationTemporality::Cumulative as i32;
    let metrics = Instrument::ALL
        .iter()
        .filter_map(|&instrument| {
            let points: Vec<_> = series.iter().filter(|(i, _, _)| *i == instrument).collect();
            if points.is_empty() {
                return None;
            }
            let data = match points[0].2 {
                Aggregate::Sum(_) => pm::metric::Data::Sum(pm::Sum {
                    data_points: points
                        .iter()
                        .map(|(_, key, agg)| pm::NumberDataPoint {
                            attributes: series_attributes(key),
                            start_time_unix_nano: start,
                            time_unix_nano: now,
                            value: Some(pm::number_data_point::Value::AsInt(match agg {
                                Aggregate::Sum(n) => i64::try_from(*n).unwrap_or(i64::MAX),
                                Aggregate::Histogram { count, .. } => *count as i64,
                            })),
                            ..Default::default()
                        })
                        .collect(),
                    aggregation_temporality: cumulative,
                    is_monotonic: true,
                }),
                Aggregate::Histogram { .. } => pm::metric::Data::Histogram(pm::Histogram {
                    data_points: points
                        .iter()
                        .filter_map(|(_, key, agg)| match agg {
                            Aggregate::Histogram {
                                count,
                                sum,
                                min,
                                max,
                                bucket_counts,
                                bounds,
                            } => Some(pm::HistogramDataPoint {
                                attributes: series_attributes(key),
                                start_time_unix_nano: start,
                                time_unix_nano: now,
                                count: *count,
                                sum: Some(*sum),
                                bucket_counts: bucket_counts.clone(),
                                explicit_bounds: bounds.to_vec(),
                                min: Some(*min),
                                max: Some(*max),
                                ..Default::default()
                            }),
                            Aggregate::Sum(_) => None,
                        })
                        .collect(),
                    aggregation_temporality: cumulative,
                }),
            };
            Some(pm::Metric {
                name: instrument.name().to_owned(),
                description: instrument.description().to_owned(),
                unit: instrument.unit().to_owned(),
                data: Some(data),
                ..Default::default()
            })
        })
        .collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![pm::ResourceMetrics {
            resource: Some(resource(config)),
            scope_metrics: vec![pm::ScopeMetrics {
                scope: Some(scope()),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::span::attr;

    fn config() -> TelemetryConfig {
        TelemetryConfig {
            traces_url: "http://x/v1/traces".into(),
            metrics_url: None,
            headers: vec![],
            service_name: "svc".into(),
            resource: vec![("deployment.environment".into(), "test".into())],
            capture_content: false,
            timeout: std::time::Duration::from_secs(1),
            queue_capacity: 8,
            export_interval: std::time::Duration::from_secs(1),
        }
    }

    /// The body decodes back into the span it was made from (ids, parent, attributes, status).
    #[test]
    fn a_span_round_trips_through_the_protobuf_body() {
        let parent = crate::telemetry::traceparent::parse(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            Some("k=v"),
        )
        .unwrap();
        let mut s = SpanRecord::start("chat m".into(), SpanKind::Client, Some(&parent));
        s.set("gen_ai.request.model", "m");
        s.set("gen_ai.usage.input_tokens", 12u64);
        s.event("agentao.retry", vec![attr("agentao.llm.retry", 1u32)]);
        s.fail("boom");
        let s = s.finish();
        let body = traces_body(&config(), std::slice::from_ref(&s));
        let req = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let rs = &req.resource_spans[0];
        let res = &rs.resource.as_ref().unwrap().attributes;
        assert!(res.iter().any(|kv| kv.key == "service.name"));
        assert!(res.iter().any(|kv| kv.key == "deployment.environment"));
        let got = &rs.scope_spans[0].spans[0];
        assert_eq!(got.trace_id, parent.trace_id.0.to_vec());
        assert_eq!(got.parent_span_id, parent.span_id.0.to_vec());
        assert_eq!(got.trace_state, "k=v");
        assert_eq!(got.kind, pt::span::SpanKind::Client as i32);
        assert_eq!(got.attributes.len(), 2);
        assert_eq!(got.events[0].name, "agentao.retry");
        let status = got.status.as_ref().unwrap();
        assert_eq!((status.code, status.message.as_str()), (2, "boom"));
    }
}
