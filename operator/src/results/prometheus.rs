//! A small client for Prometheus's HTTP API: instant queries, evaluated server-side.

use std::time::Duration;

use jiff::Timestamp;
use prometheus_client::metrics::counter::Counter;
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum PromError {
    #[error("Prometheus at {url} is unreachable: {source}")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("Prometheus refused the query {query:?}: {error_type}: {error}")]
    Query {
        query: String,
        error_type: String,
        error: String,
    },
    #[error("unexpected answer from Prometheus for {query:?}: {detail}")]
    Decode { query: String, detail: String },
}

impl PromError {
    /// Whether trying again later may succeed: Prometheus unreachable, restarting,
    /// overloaded or timing out (its data may well be there), as opposed to refusing the
    /// query itself (`bad_data`).
    pub fn is_transient(&self) -> bool {
        match self {
            PromError::Http { .. } | PromError::Decode { .. } => true,
            PromError::Query { error_type, .. } => error_type != "bad_data",
        }
    }
}

#[derive(Clone)]
pub struct Prometheus {
    http: reqwest::Client,
    base: String,
    /// Counts the queries sent (the operator's own metrics).
    queries: Counter,
}

/// The HTTP client Prometheus queries share (one connection pool per process).
pub fn http_client() -> reqwest::Client {
    // rustls needs a process-wide provider; ring is the one the workspace builds.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

/// One sample of an instant vector (or a scalar, with no labels).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: serde_json::Map<String, serde_json::Value>,
    pub value: f64,
}

#[derive(Deserialize)]
struct Response {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum Data {
    Vector(Vec<VectorSample>),
    Scalar((f64, String)),
    Matrix(serde::de::IgnoredAny),
    String(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct RangeResponse {
    status: String,
    #[serde(default)]
    data: Option<RangeData>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct RangeData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<MatrixSeries>,
}

#[derive(Deserialize)]
struct MatrixSeries {
    values: Vec<(f64, String)>,
}

#[derive(Deserialize)]
struct VectorSample {
    metric: serde_json::Map<String, serde_json::Value>,
    value: (f64, String),
}

/// Prometheus writes values as strings, including "NaN" and "+Inf".
fn parse_value(s: &str) -> f64 {
    match s {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => s.parse().unwrap_or(f64::NAN),
    }
}

impl Prometheus {
    /// A client of its own (for one-off use: `valtune analyze`, tests).
    pub fn new(base: &str) -> Self {
        Self::with_client(http_client(), base, Counter::default())
    }

    pub fn with_client(http: reqwest::Client, base: &str, queries: Counter) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            queries,
        }
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// Evaluates `query` at `time` (now if None).
    pub async fn instant(
        &self,
        query: &str,
        time: Option<Timestamp>,
    ) -> Result<Vec<Sample>, PromError> {
        self.queries.inc();
        let url = format!("{}/api/v1/query", self.base);
        let mut form = vec![("query", query.to_string())];
        if let Some(t) = time {
            form.push(("time", format!("{:.3}", t.as_millisecond() as f64 / 1000.0)));
        }
        let resp = self
            .http
            .post(&url)
            .form(&form)
            .send()
            .await
            .map_err(|source| PromError::Http {
                url: self.base.clone(),
                source,
            })?;
        let body: Response = resp.json().await.map_err(|e| PromError::Decode {
            query: query.into(),
            detail: e.to_string(),
        })?;
        if body.status != "success" {
            return Err(PromError::Query {
                query: query.into(),
                error_type: body.error_type.unwrap_or_default(),
                error: body.error.unwrap_or_default(),
            });
        }
        match body.data {
            Some(Data::Vector(v)) => Ok(v
                .into_iter()
                .map(|s| Sample {
                    labels: s.metric,
                    value: parse_value(&s.value.1),
                })
                .collect()),
            Some(Data::Scalar((_, v))) => Ok(vec![Sample {
                labels: Default::default(),
                value: parse_value(&v),
            }]),
            _ => Err(PromError::Decode {
                query: query.into(),
                detail: "expected an instant vector or a scalar".into(),
            }),
        }
    }

    /// A query that aggregates to one series, evaluated every `step` from `start` to
    /// `end` (`/api/v1/query_range`): its (unix seconds, value) points, NaN left out;
    /// empty when there is no data.
    pub async fn range(
        &self,
        query: &str,
        start: Timestamp,
        end: Timestamp,
        step: Duration,
    ) -> Result<Vec<(f64, f64)>, PromError> {
        self.queries.inc();
        let url = format!("{}/api/v1/query_range", self.base);
        let secs = |t: Timestamp| format!("{:.3}", t.as_millisecond() as f64 / 1000.0);
        let form = vec![
            ("query", query.to_string()),
            ("start", secs(start)),
            ("end", secs(end)),
            ("step", format!("{:.3}", step.as_secs_f64().max(0.001))),
        ];
        let resp = self
            .http
            .post(&url)
            .form(&form)
            .send()
            .await
            .map_err(|source| PromError::Http {
                url: self.base.clone(),
                source,
            })?;
        let decode = |detail: String| PromError::Decode {
            query: query.into(),
            detail,
        };
        let body: RangeResponse = resp.json().await.map_err(|e| decode(e.to_string()))?;
        if body.status != "success" {
            return Err(PromError::Query {
                query: query.into(),
                error_type: body.error_type.unwrap_or_default(),
                error: body.error.unwrap_or_default(),
            });
        }
        let data = body.data.ok_or_else(|| decode("no data".into()))?;
        if data.result_type != "matrix" || data.result.len() > 1 {
            return Err(decode(format!(
                "expected one series of a matrix, got {} of a {}",
                data.result.len(),
                data.result_type
            )));
        }
        Ok(data
            .result
            .into_iter()
            .flat_map(|s| s.values)
            .map(|(t, v)| (t, parse_value(&v)))
            .filter(|(_, v)| !v.is_nan())
            .collect())
    }

    /// The single value of a query that aggregates to one series; None when there is no
    /// data (an empty vector) or the value is NaN.
    pub async fn value(
        &self,
        query: &str,
        time: Option<Timestamp>,
    ) -> Result<Option<f64>, PromError> {
        let samples = self.instant(query, time).await?;
        if samples.len() > 1 {
            return Err(PromError::Decode {
                query: query.into(),
                detail: format!("expected one series, got {}", samples.len()),
            });
        }
        Ok(samples.first().map(|s| s.value).filter(|v| !v.is_nan()))
    }
}
