//! How big an image a worker pulls and unpacks: the caps on its configuration's size, its
//! layer count, and the bytes and entries its layers unpack to (all layers together),
//! with the environment variables an operator overrides them with. Pure: the worker's
//! `image` module reads the variables once ([`ImageLimits::from_lookup`]) and checks each
//! blob and entry against a [`Budget`] while it unpacks, so an image over a cap stops
//! mid-layer instead of filling the disk. docs/limits.md lists the same caps.

/// The caps on one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Most bytes of the image configuration blob.
    pub config_bytes: u64,
    /// Most layers.
    pub layers: u64,
    /// Most bytes written to the root file system while unpacking every layer (file
    /// contents, a file replaced by a later layer counting twice).
    pub unpacked_bytes: u64,
    /// Most entries (files, folders, links, whiteouts) across every layer.
    pub files: u64,
}

/// One cap: its name in messages, the variable that overrides it, its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// What it caps, for messages (`unpacked bytes`).
    pub what: &'static str,
    /// The environment variable overriding it.
    pub var: &'static str,
    /// The default.
    pub default: u64,
}

/// The image configuration's size: the cap a manifest has (4 MiB); a configuration is a
/// small JSON document.
pub const CONFIG_BYTES: Cap = Cap {
    what: "configuration bytes",
    var: "AKBENCH_IMAGE_MAX_CONFIG_BYTES",
    default: 4 << 20,
};
/// Layers per image: docker's and overlayfs' practical limit (127 lower layers).
pub const LAYERS: Cap = Cap {
    what: "layers",
    var: "AKBENCH_IMAGE_MAX_LAYERS",
    default: 128,
};
/// Bytes unpacked per image (32 GiB): above the largest task images (a few GiB).
pub const UNPACKED_BYTES: Cap = Cap {
    what: "unpacked bytes",
    var: "AKBENCH_IMAGE_MAX_BYTES",
    default: 32 << 30,
};
/// Entries per image (500,000): a Debian image with a toolchain has about 100,000.
pub const FILES: Cap = Cap {
    what: "entries (files, folders, links)",
    var: "AKBENCH_IMAGE_MAX_FILES",
    default: 500_000,
};

/// Every cap, in the order docs list them.
pub const CAPS: [Cap; 4] = [CONFIG_BYTES, LAYERS, UNPACKED_BYTES, FILES];

impl Default for ImageLimits {
    fn default() -> Self {
        ImageLimits {
            config_bytes: CONFIG_BYTES.default,
            layers: LAYERS.default,
            unpacked_bytes: UNPACKED_BYTES.default,
            files: FILES.default,
        }
    }
}

impl ImageLimits {
    /// The caps, each from its variable (`lookup` reads one) or its default; a variable
    /// that is set but not a whole number above 0 is refused, naming it.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let one = |cap: Cap| -> Result<u64, String> {
            match lookup(cap.var) {
                None => Ok(cap.default),
                Some(text) => match text.trim().parse::<u64>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(format!(
                        "{}: `{}` is not a whole number above 0; fix: set the most {} an image may have (default {})",
                        cap.var,
                        crate::limits::elide(&text),
                        cap.what,
                        cap.default
                    )),
                },
            }
        };
        Ok(ImageLimits {
            config_bytes: one(CONFIG_BYTES)?,
            layers: one(LAYERS)?,
            unpacked_bytes: one(UNPACKED_BYTES)?,
            files: one(FILES)?,
        })
    }

    /// Checks what the manifest says before anything is downloaded: the configuration's
    /// declared size and the number of layers.
    pub fn check_manifest(&self, config_size: u64, layers: usize) -> Result<(), String> {
        if config_size > self.config_bytes {
            return Err(over(CONFIG_BYTES, self.config_bytes, config_size));
        }
        if layers as u64 > self.layers {
            return Err(over(LAYERS, self.layers, layers as u64));
        }
        Ok(())
    }

    /// A budget for unpacking one image's layers.
    pub fn budget(&self) -> Budget {
        Budget {
            limits: *self,
            bytes: 0,
            files: 0,
        }
    }
}

/// The message for a value over its cap: which cap, the limit, the variable to raise.
pub fn over(cap: Cap, limit: u64, got: u64) -> String {
    format!(
        "the image has more than {limit} {} (at least {got}); fix: slim the image, or, when it is trusted, raise {} (default {})",
        cap.what, cap.var, cap.default
    )
}

/// What unpacking one image has used so far of its caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    limits: ImageLimits,
    bytes: u64,
    files: u64,
}

impl Budget {
    /// Counts one more entry; an error once there are more than the cap.
    pub fn entry(&mut self) -> Result<(), String> {
        self.files += 1;
        if self.files > self.limits.files {
            return Err(over(FILES, self.limits.files, self.files));
        }
        Ok(())
    }

    /// Counts `n` more bytes written; an error once there are more than the cap (callers
    /// check an entry's declared size first, then each piece as it is written).
    pub fn bytes(&mut self, n: u64) -> Result<(), String> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.limits.unpacked_bytes {
            return Err(over(UNPACKED_BYTES, self.limits.unpacked_bytes, self.bytes));
        }
        Ok(())
    }

    /// Whether `n` more bytes would still fit (an entry's declared size, before writing).
    pub fn fits(&self, n: u64) -> Result<(), String> {
        let total = self.bytes.saturating_add(n);
        if total > self.limits.unpacked_bytes {
            return Err(over(UNPACKED_BYTES, self.limits.unpacked_bytes, total));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_come_from_their_variables_or_defaults_and_bad_values_are_named() {
        let l = ImageLimits::from_lookup(|_| None).unwrap();
        assert_eq!(l, ImageLimits::default());
        let l = ImageLimits::from_lookup(|v| (v == LAYERS.var).then(|| " 3 ".to_string())).unwrap();
        assert_eq!(l.layers, 3);
        for bad in ["0", "-1", "x", "1e9", ""] {
            let e = ImageLimits::from_lookup(|v| (v == FILES.var).then(|| bad.to_string()))
                .unwrap_err();
            assert!(e.contains(FILES.var) && e.contains("fix:"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_manifest_is_checked_before_any_download() {
        let l = ImageLimits {
            config_bytes: 100,
            layers: 2,
            ..ImageLimits::default()
        };
        assert!(l.check_manifest(100, 2).is_ok());
        let e = l.check_manifest(101, 1).unwrap_err();
        assert!(e.contains(CONFIG_BYTES.var) && e.contains("100"), "{e}");
        let e = l.check_manifest(10, 3).unwrap_err();
        assert!(
            e.contains(LAYERS.var) && e.contains("more than 2 layers"),
            "{e}"
        );
    }

    #[test]
    fn a_budget_refuses_the_entry_or_byte_past_its_cap() {
        let mut b = ImageLimits {
            unpacked_bytes: 10,
            files: 2,
            ..ImageLimits::default()
        }
        .budget();
        b.entry().unwrap();
        b.entry().unwrap();
        let e = b.entry().unwrap_err();
        assert!(e.contains(FILES.var), "{e}");
        assert!(b.fits(10).is_ok());
        b.bytes(6).unwrap();
        assert!(b.fits(5).unwrap_err().contains(UNPACKED_BYTES.var));
        b.bytes(4).unwrap();
        assert!(b
            .bytes(1)
            .unwrap_err()
            .contains("more than 10 unpacked bytes"));
        assert!(b.bytes(u64::MAX).is_err(), "saturates");
    }
}
