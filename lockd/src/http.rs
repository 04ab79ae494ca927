//! Plumbing shared by lockd and the store: JSON errors, body parsing, name checks.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::json;

/// Lock names, store keys and client names are at most this long, so a client cannot make
/// the server keep arbitrarily large strings.
pub(crate) const NAME_BYTES_MAX: usize = 256;
/// Every valid request body is tiny; this only stops a client from streaming megabytes.
pub(crate) const BODY_BYTES_MAX: usize = 16 * 1024;

/// A request that failed; each variant maps to one status and a JSON `{"error": ...}` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApiError {
    /// 400 `bad-request: <reason>`.
    BadRequest(String),
    /// 409 with a definite-failure code (`held`, `recovering`, `not-holder`).
    Conflict(&'static str),
    /// 409 with a definite-failure code and what the service knows about it (`held`, with
    /// how long the ring's token has not been seen).
    ConflictWith { code: &'static str, detail: String },
    /// 409 `stale-token` with the store's current fence.
    StaleToken { fence: u64 },
    /// 503: a bound was hit or the server is stopping; the request did not take effect.
    Unavailable(&'static str),
    /// 404 `not-found`: no such endpoint.
    NotFound,
    /// 404 with a code: the endpoint exists, what it names does not (`no-token`).
    NotFoundCode(&'static str),
    /// 500: could not make a grant durable, so it was not made.
    Internal(&'static str),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::BadRequest(reason) => (
                StatusCode::BAD_REQUEST,
                Json(json!({ "error": format!("bad-request: {reason}") })),
            )
                .into_response(),
            ApiError::Conflict(code) => {
                (StatusCode::CONFLICT, Json(json!({ "error": code }))).into_response()
            }
            ApiError::ConflictWith { code, detail } => (
                StatusCode::CONFLICT,
                Json(json!({ "error": code, "detail": detail })),
            )
                .into_response(),
            ApiError::StaleToken { fence } => (
                StatusCode::CONFLICT,
                Json(json!({ "error": "stale-token", "fence": fence })),
            )
                .into_response(),
            ApiError::Unavailable(code) => (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "error": code })),
            )
                .into_response(),
            ApiError::NotFound => {
                (StatusCode::NOT_FOUND, Json(json!({ "error": "not-found" }))).into_response()
            }
            ApiError::NotFoundCode(code) => {
                (StatusCode::NOT_FOUND, Json(json!({ "error": code }))).into_response()
            }
            ApiError::Internal(code) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({ "error": code })),
            )
                .into_response(),
        }
    }
}

/// Parses the body ourselves instead of using axum's `Json` extractor so that every bad body
/// (wrong content type, bad JSON, missing field) gets the protocol's 400 JSON answer.
pub(crate) fn parse_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// A request body that names its client and, when it asks for a lease, its ttl.
pub(crate) trait ClientBody: DeserializeOwned {
    fn client(&self) -> &str;
    /// The lease the request asks for; None for requests that ask for none.
    fn ttl_ms(&self) -> Option<u64> {
        None
    }
}

/// Every handler's first step: the named lock or key from the path and the body, each
/// checked (the names not empty and not too long, the ttl within its limits), so no handler
/// sees a request it would have to check again.
pub(crate) fn named_request<T: ClientBody>(
    what: &str,
    path: Result<Path<String>, PathRejection>,
    body: &Bytes,
) -> Result<(String, T), ApiError> {
    let name = path_name(what, path)?;
    let req: T = parse_body(body)?;
    check_name("client", req.client())?;
    if let Some(ttl_ms) = req.ttl_ms() {
        crate::service::check_ttl(ttl_ms)?;
    }
    Ok((name, req))
}

/// `what` names the segment in the error ("lock", "key").
pub(crate) fn path_name(
    what: &str,
    path: Result<Path<String>, PathRejection>,
) -> Result<String, ApiError> {
    let Path(name) = path.map_err(|e| ApiError::BadRequest(format!("{what} name: {e}")))?;
    check_name(what, &name)?;
    Ok(name)
}

pub(crate) fn check_name(what: &str, name: &str) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::BadRequest(format!("{what} name is empty")));
    }
    if name.len() > NAME_BYTES_MAX {
        return Err(ApiError::BadRequest(format!(
            "{what} name is {} bytes, at most {NAME_BYTES_MAX} allowed",
            name.len()
        )));
    }
    Ok(())
}

pub(crate) async fn health() -> Json<serde_json::Value> {
    Json(json!({ "ok": true }))
}

pub(crate) async fn not_found() -> ApiError {
    ApiError::NotFound
}
