//! Records which libtorch variant this binary was built against.
//!
//! `LIBTORCH_PATH` points at a libtorch variant dir (native prebuilds set it;
//! the compose services set `/usr/local/libtorch`, where the variant dir is
//! mounted). The demo's fake variants carry a `VARIANT` marker file whose
//! content (e.g. `precompiled/cu128`) is embedded as `FLODL_DEMO_VARIANT`.
use std::env;
use std::fs;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH_PATH");
    let variant = match env::var("LIBTORCH_PATH") {
        Ok(root) if !root.trim().is_empty() => {
            let dir = Path::new(root.trim());
            let marker = dir.join("VARIANT");
            if marker.is_file() {
                println!("cargo:rerun-if-changed={}", marker.display());
            } else if dir.is_dir() {
                // No marker (e.g. a real libtorch): re-run if one appears.
                println!("cargo:rerun-if-changed={}", dir.display());
            }
            fs::read_to_string(&marker)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "none".to_string())
        }
        _ => "none".to_string(),
    };
    println!("cargo:rustc-env=FLODL_DEMO_VARIANT={}", variant);
}
