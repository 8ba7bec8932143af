//! The `telemetry` config section and the standard `OTEL_*` environment variables, resolved
//! into one [`TelemetryConfig`] (or none: no exporter, and then no cost).
//!
//! The section's keys win over the environment; `"enabled": false` turns export off whatever
//! the environment says. Only OTLP over HTTP with protobuf bodies is spoken: a
//! `OTEL_EXPORTER_OTLP_PROTOCOL` (or `…_TRACES_PROTOCOL`) other than `http/protobuf` is an
//! error that names the variable, rather than spans silently going nowhere.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::config_field::Section;
use crate::llm::config::Env;

/// The spans a queue holds when the config gives no `queue_capacity`.
pub const DEFAULT_QUEUE_CAPACITY: usize = 2048;
const MAX_QUEUE_CAPACITY: usize = 1 << 20;
/// How long an export request may take (the OTLP default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often queued spans and the metrics go out when no batch filled first.
const DEFAULT_EXPORT_INTERVAL: Duration = Duration::from_secs(1);

/// The `telemetry` section as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TelemetrySection {
    enabled: Option<bool>,
    /// The OTLP/HTTP base URL; `/v1/traces` and `/v1/metrics` are appended.
    endpoint: Option<String>,
    /// The full URL spans are posted to (overrides `endpoint`).
    traces_endpoint: Option<String>,
    /// The full URL metrics are posted to (overrides `endpoint`).
    metrics_endpoint: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    service_name: Option<String>,
    /// Whether prompts, tool arguments and tool results go into spans (secrets redacted).
    #[serde(default)]
    capture_content: bool,
    /// Whether metrics are exported (default: yes, when spans are).
    metrics: Option<bool>,
    timeout_ms: Option<u64>,
    queue_capacity: Option<usize>,
    export_interval_ms: Option<u64>,
}

impl Section for TelemetrySection {}

/// Where and how telemetry is exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub traces_url: String,
    /// `None`: no metrics.
    pub metrics_url: Option<String>,
    pub headers: Vec<(String, String)>,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, as `key=value` pairs.
    pub resource: Vec<(String, String)>,
    pub capture_content: bool,
    pub timeout: Duration,
    pub queue_capacity: usize,
    pub export_interval: Duration,
}

fn env_flag(env: &dyn Env, key: &str) -> bool {
    env.var(key)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

fn check_url(url: &str, field: &str) -> Result<String, String> {
    let parsed =
        url::Url::parse(url.trim()).map_err(|e| format!("{field}: '{url}' is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{field}: '{url}' is not an http or https URL"));
    }
    Ok(parsed.to_string())
}

/// `base` with `/v1/<signal>` appended to its path (the OTLP/HTTP rule for the base endpoint).
fn signal_url(base: &str, signal: &str, field: &str) -> Result<String, String> {
    let base = check_url(base, field)?;
    Ok(format!("{}/v1/{signal}", base.trim_end_matches('/')))
}

/// `k1=v1,k2=v2` with percent-encoded values (`OTEL_EXPORTER_OTLP_HEADERS`,
/// `OTEL_RESOURCE_ATTRIBUTES`); a member without `=` is an error naming the variable.
fn key_values(text: &str, var: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for member in text.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let (k, v) = member
            .split_once('=')
            .ok_or_else(|| format!("{var}: '{member}' is not key=value"))?;
        let v = url::form_urlencoded::parse(format!("v={v}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        out.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    Ok(out)
}

impl TelemetrySection {
    /// The export settings, or `None` when nothing asks for an exporter.
    pub(crate) fn resolve(self, env: &dyn Env) -> Result<Option<TelemetryConfig>, String> {
        if self.enabled == Some(false) {
            return Ok(None);
        }
        let env_off = env_flag(env, "OTEL_SDK_DISABLED")
            || env
                .var("OTEL_TRACES_EXPORTER")
                .is_some_and(|v| v.trim() == "none");
        let field = |k: &str| format!("config field `telemetry.{k}`");
        let traces_url = match (&self.traces_endpoint, &self.endpoint) {
            (Some(u), _) => Some(check_url(u, &field("traces_endpoint"))?),
            (None, Some(b)) => Some(signal_url(b, "traces", &field("endpoint"))?),
            (None, None) if env_off && self.enabled != Some(true) => None,
            (None, None) => match (
                env.var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
                env.var("OTEL_EXPORTER_OTLP_ENDPOINT"),
            ) {
                (Some(u), _) => Some(check_url(&u, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")?),
                (None, Some(b)) => Some(signal_url(&b, "traces", "OTEL_EXPORTER_OTLP_ENDPOINT")?),
                (None, None) if self.enabled == Some(true) => {
                    // The OTLP default, for a config that turns export on and names no place.
                    Some("http://localhost:4318/v1/traces".to_owned())
                }
                (None, None) => None,
            },
        };
        let Some(traces_url) = traces_url else {
            return Ok(None);
        };
        if !cfg!(feature = "otel") {
            return Err(
                "config field `telemetry`: this build has no OpenTelemetry export (cargo feature `otel`)".into(),
            );
        }
        for var in [
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        ] {
            if let Some(p) = env.var(var) {
                if p.trim() != "http/protobuf" {
                    return Err(format!(
                        "{var}: '{p}' is not supported; libagentao exports OTLP as http/protobuf"
                    ));
                }
            }
        }
        let metrics_on = self.metrics.unwrap_or_else(|| {
            env.var("OTEL_METRICS_EXPORTER")
                .is_none_or(|v| v.trim() != "none")
        });
        let metrics_url = if !metrics_on {
            None
        } else {
            match (&self.metrics_endpoint, &self.endpoint) {
                (Some(u), _) => Some(check_url(u, &field("metrics_endpoint"))?),
                (None, Some(b)) => Some(signal_url(b, "metrics", &field("endpoint"))?),
                (None, None) => match (
                    env.var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
                    env.var("OTEL_EXPORTER_OTLP_ENDPOINT"),
                ) {
                    (Some(u), _) => Some(check_url(&u, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")?),
                    (None, Some(b)) => {
                        Some(signal_url(&b, "metrics", "OTEL_EXPORTER_OTLP_ENDPOINT")?)
                    }
                    // Beside the traces' URL, as the OTLP default layout has it.
                    (None, None) => Some(traces_url.replace("/v1/traces", "/v1/metrics"))
                        .filter(|u| u.ends_with("/v1/metrics")),
                },
            }
        };
        let mut headers: Vec<(String, String)> = match env.var("OTEL_EXPORTER_OTLP_HEADERS") {
            Some(h) => key_values(&h, "OTEL_EXPORTER_OTLP_HEADERS")?,
            None => Vec::new(),
        };
        for (k, v) in self.headers {
            headers.retain(|(hk, _)| !hk.eq_ignore_ascii_case(&k));
            headers.push((k, v));
        }
        for (k, v) in &headers {
            if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                || reqwest::header::HeaderValue::from_str(v).is_err()
            {
                return Err(format!(
                    "{}: '{k}' is not a valid HTTP header",
                    field("headers")
                ));
            }
        }
        let resource = match env.var("OTEL_RESOURCE_ATTRIBUTES") {
            Some(r) => key_values(&r, "OTEL_RESOURCE_ATTRIBUTES")?,
            None => Vec::new(),
        };
        let service_name = self
            .service_name
            .or_else(|| env.var("OTEL_SERVICE_NAME"))
            .or_else(|| {
                resource
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| "agentao".to_owned());
        let timeout = match self.timeout_ms {
            Some(0) => return Err(format!("{}: must be positive", field("timeout_ms"))),
            Some(ms) => Duration::from_millis(ms),
            None => env
                .var("OTEL_EXPORTER_OTLP_TIMEOUT")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        };
        let queue_capacity = self.queue_capacity.unwrap_or(DEFAULT_QUEUE_CAPACITY);
        if queue_capacity == 0 || queue_capacity > MAX_QUEUE_CAPACITY {
            return Err(format!(
                "{}: must be between 1 and {MAX_QUEUE_CAPACITY}",
                field("queue_capacity")
            ));
        }
        let export_interval = match self.export_interval_ms {
            Some(0) => return Err(format!("{}: must be positive", field("export_interval_ms"))),
            Some(ms) => Duration::from_millis(ms),
            None => DEFAULT_EXPORT_INTERVAL,
        };
        Ok(Some(TelemetryConfig {
            traces_url,
            metrics_url,
            headers,
            service_name,
            resource,
            capture_content: self.capture_content,
            timeout,
            queue_capacity,
            export_interval,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Vars(HashMap<&'static str, &'static str>);

    impl Env for Vars {
        fn var(&self, key: &str) -> Option<String> {
            self.0.get(key).map(|v| v.to_string())
        }
    }

    fn resolve(
        section: serde_json::Value,
        vars: &[(&'static str, &'static str)],
    ) -> Result<Option<TelemetryConfig>, String> {
        let s: TelemetrySection = serde_json::from_value(section).unwrap();
        s.resolve(&Vars(vars.iter().copied().collect()))
    }

    #[test]
    fn nothing_configured_is_no_exporter() {
        assert_eq!(resolve(serde_json::json!({}), &[]), Ok(None));
    }

    #[test]
    fn the_standard_variables_configure_the_exporter() {
        let c = resolve(
            serde_json::json!({}),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "x-tenant=a%20b, authorization=Bearer t",
                ),
                ("OTEL_SERVICE_NAME", "svc"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.traces_url, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(
            c.metrics_url.as_deref(),
            Some("http://127.0.0.1:4318/v1/metrics")
        );
        assert_eq!(
            c.headers,
            vec![
                ("x-tenant".to_owned(), "a b".to_owned()),
                ("authorization".to_owned(), "Bearer t".to_owned())
            ]
        );
        assert_eq!(c.service_name, "svc");
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert!(!c.capture_content);
    }

    #[test]
    fn the_config_wins_over_the_environment_and_can_turn_export_off() {
        let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318")];
        let c = resolve(
            serde_json::json!({"traces_endpoint": "http://cfg:1/t", "metrics": false}),
            &vars,
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.traces_url, "http://cfg:1/t");
        assert_eq!(c.metrics_url, None);
        assert_eq!(
            resolve(serde_json::json!({"enabled": false}), &vars),
            Ok(None)
        );
        assert_eq!(
            resolve(
                serde_json::json!({}),
                &[vars[0], ("OTEL_SDK_DISABLED", "true")]
            ),
            Ok(None)
        );
    }

    #[test]
    fn bad_settings_are_errors_that_name_them() {
        let e = resolve(serde_json::json!({"endpoint": "ftp://x"}), &[]).unwrap_err();
        assert!(e.contains("telemetry.endpoint"), "{e}");
        let e = resolve(serde_json::json!({"endpoint": "not a url"}), &[]).unwrap_err();
        assert!(e.contains("not a URL"), "{e}");
        let e = resolve(
            serde_json::json!({}),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ],
        )
        .unwrap_err();
        assert!(e.contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{e}");
        let e = resolve(
            serde_json::json!({"endpoint": "http://x", "queue_capacity": 0}),
            &[],
        )
        .unwrap_err();
        assert!(e.contains("queue_capacity"), "{e}");
        let e = resolve(
            serde_json::json!({"endpoint": "http://x", "headers": {"bad header": "v"}}),
            &[],
        )
        .unwrap_err();
        assert!(e.contains("headers"), "{e}");
    }
}
