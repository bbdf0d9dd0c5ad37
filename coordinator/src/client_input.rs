//! Checks of what a client sends (a run key or UUID, a trial key, free text) before it
//! reaches the database or an error message: a refusal is `INVALID_ARGUMENT` naming the
//! field. Used by the control service and by the lookups in [`crate::evidence`].

use crate::error::ControlError;

/// Checks an identifier from a request (a run key or UUID, a trial key) before it reaches the
/// database or an error message ([`akbench_core::ids::check_client_id`]): a refusal is
/// `INVALID_ARGUMENT` naming the field, never a 300 KB echo or a NUL byte sent to PostgreSQL.
pub fn client_id<'a>(
    action: &'static str,
    field: &'static str,
    value: &'a str,
) -> Result<&'a str, ControlError> {
    let value = value.trim();
    akbench_core::ids::check_client_id(value).map_err(|why| {
        ControlError::invalid(
            action,
            field,
            format!("{why}; fix: pass the run key, UUID or trial key akbench printed"),
        )
    })?;
    Ok(value)
}

/// The most bytes of free text (a cancel reason) a request may carry.
pub const MAX_TEXT_BYTES: usize = 4096;

/// Checks free text from a request: at most [`MAX_TEXT_BYTES`], no control characters but
/// newlines and tabs (PostgreSQL refuses a NUL in text).
pub fn client_text<'a>(
    action: &'static str,
    field: &'static str,
    value: &'a str,
) -> Result<&'a str, ControlError> {
    if value.len() > MAX_TEXT_BYTES {
        return Err(ControlError::invalid(
            action,
            field,
            format!(
                "is {} bytes, more than the maximum {MAX_TEXT_BYTES}; fix: say it in a line",
                value.len()
            ),
        ));
    }
    if let Some(i) = value
        .bytes()
        .position(|b| b.is_ascii_control() && b != b'\n' && b != b'\t')
    {
        return Err(ControlError::invalid(
            action,
            field,
            format!(
                "holds control byte 0x{:02x} at offset {i}; fix: send plain text",
                value.as_bytes()[i]
            ),
        ));
    }
    Ok(value)
}
