//! Table tests of the walk over Harbor's keys: each accepted value, each refused one with
//! its message (the file, the key and the fix).

use super::*;
