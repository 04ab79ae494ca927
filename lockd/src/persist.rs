//! lockd's durable state: one small JSON file replaced atomically.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::LockdError;

/// Name of lockd's state file inside `data_dir`.
pub const STATE_FILE_NAME: &str = "lockd-state.json";
const TEMP_FILE_NAME: &str = "lockd-state.json.tmp";
const FORMAT_VERSION: u32 = 1;
/// A real state file is ~70 bytes; anything far larger is not ours.
const STATE_FILE_BYTES_MAX: u64 = 4096;

/// What lockd must remember across `kill -9`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DurableState {
    pub version: u32,
    /// Every token handed out so far is below this; the next incarnation starts here.
    pub reserved_token: u64,
    /// No lease ever granted (or renewed) was longer than this.
    pub max_ttl_ms: u64,
}

impl DurableState {
    pub fn fresh() -> Self {
        DurableState {
            version: FORMAT_VERSION,
            reserved_token: 1,
            max_ttl_ms: 0,
        }
    }
}

pub(crate) fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE_NAME)
}

/// `Ok(None)` when the directory holds no state, i.e. this is the first incarnation.
pub(crate) fn load(dir: &Path, max_ttl_ms_limit: u64) -> Result<Option<DurableState>, LockdError> {
    let path = state_path(dir);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(LockdError::ReadState { path, source }),
    };
    let corrupt = |reason: String| LockdError::CorruptState {
        path: path.clone(),
        reason,
    };
    let len = file
        .metadata()
        .map_err(|source| LockdError::ReadState {
            path: path.clone(),
            source,
        })?
        .len();
    if len > STATE_FILE_BYTES_MAX {
        return Err(corrupt(format!(
            "{len} bytes, expected at most {STATE_FILE_BYTES_MAX}"
        )));
    }
    let state: DurableState =
        serde_json::from_reader(io::BufReader::new(file)).map_err(|e| corrupt(e.to_string()))?;
    if state.version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "format version {}, this lockd reads version {FORMAT_VERSION}",
            state.version
        )));
    }
    if state.reserved_token == 0 {
        return Err(corrupt("reserved_token is 0; tokens start at 1".to_owned()));
    }
    if state.max_ttl_ms > max_ttl_ms_limit {
        return Err(corrupt(format!(
            "max_ttl_ms {} exceeds the limit {max_ttl_ms_limit}",
            state.max_ttl_ms
        )));
    }
    Ok(Some(state))
}

/// Durable once this returns: a crash at any point leaves either the old or the new file,
/// never a torn one (write temp, fsync it, rename over, fsync the directory entry).
pub(crate) fn store(dir: &Path, state: &DurableState) -> Result<(), LockdError> {
    let path = state_path(dir);
    let tmp = dir.join(TEMP_FILE_NAME);
    let write_err = |source: io::Error| LockdError::WriteState {
        path: path.clone(),
        source,
    };
    let mut bytes = serde_json::to_vec(state).expect("DurableState always serializes");
    bytes.push(b'\n');
    {
        let mut f = File::create(&tmp).map_err(write_err)?;
        f.write_all(&bytes).map_err(write_err)?;
        f.sync_all().map_err(write_err)?;
    }
    fs::rename(&tmp, &path).map_err(write_err)?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(write_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_missing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path(), 10_000).unwrap(), None);
        let st = DurableState {
            version: FORMAT_VERSION,
            reserved_token: 42,
            max_ttl_ms: 2048,
        };
        store(dir.path(), &st).unwrap();
        assert_eq!(load(dir.path(), 10_000).unwrap(), Some(st));
        assert!(!dir.path().join(TEMP_FILE_NAME).exists());
    }

    #[test]
    fn corrupt_file_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for text in [
            "not json",
            r#"{"version":2,"reserved_token":5,"max_ttl_ms":0}"#,
            r#"{"version":1,"reserved_token":0,"max_ttl_ms":0}"#,
            r#"{"version":1,"reserved_token":5,"max_ttl_ms":99999999}"#,
            r#"{"version":1,"reserved_token":5}"#,
        ] {
            fs::write(state_path(dir.path()), text).unwrap();
            let err = load(dir.path(), 10_000).unwrap_err();
            assert!(
                matches!(err, LockdError::CorruptState { .. }),
                "{text}: {err}"
            );
            assert!(err.to_string().contains(STATE_FILE_NAME), "{err}");
        }
    }
}
