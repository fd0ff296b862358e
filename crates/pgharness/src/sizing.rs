//! Sizing a configuration that no server runs yet: PostgreSQL's own `shared_memory_size_in_huge_pages` and
//! `shared_memory_size` for settings given (`hugepages --shared-buffers 2GB --max-connections 200`), asked of
//! a scratch cluster with `postgres -D DIR -C NAME -c SETTING=VALUE ...` (PostgreSQL 15+: runtime-computed
//! settings need a data directory with a control file, so initdb makes one in a private temp dir, removed
//! at once; about 1.2 s here). The segment is more than `shared_buffers`: PostgreSQL adds its lock tables,
//! buffer descriptors, WAL buffers and per-connection state (2 GB of shared_buffers with 200 connections
//! take 2,125 MB on PostgreSQL 15, 1,063 pages of 2 MB, where 2 GB alone would be 1,024: issue 46 item 3).

use hostfacts::pgbin::BinDir;
use results::host::hugepages::Basis;

use crate::pgcluster::{Cluster, ClusterError};

/// Why the settings could not be sized.
#[derive(Debug, thiserror::Error)]
pub enum SizingError {
    /// The binaries predate the runtime-computed settings.
    #[error("PostgreSQL {major} cannot report shared_memory_size (15+ only): install PostgreSQL 15 or later, or name its binaries with --pg-bin")]
    TooOld {
        /// Their major version.
        major: u32,
    },
    /// The scratch cluster could not be made.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// PostgreSQL refused the settings; its message in one line.
    #[error("PostgreSQL {major} refused {settings}: {message}")]
    Refused {
        /// The binaries' major version ("?" when unknown).
        major: String,
        /// The settings as given (`shared_buffers=2G`).
        settings: String,
        /// What it said.
        message: String,
    },
}

/// The basis for a server with `settings` (name, value) on pages of `page_kib` (`default_kib`: the kernel's
/// default huge page size), from PostgreSQL `bin` itself.
pub fn basis_for_settings(
    bin: BinDir,
    settings: &[(String, String)],
    page_kib: u64,
    default_kib: u64,
) -> Result<Basis, SizingError> {
    if let Some(major) = bin.major.filter(|&m| m < 15) {
        return Err(SizingError::TooOld { major });
    }
    let major = bin.major.map_or("?".to_string(), |m| m.to_string());
    let mut all = settings.to_vec();
    if page_kib != default_kib {
        all.push(("huge_page_size".into(), format!("{page_kib}kB")));
    }
    let given = |s: &[(String, String)]| {
        s.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let cluster = Cluster::create(bin, None)?;
    let computed = |name: &str| {
        cluster
            .computed(name, &all)
            .map_err(|e| SizingError::Refused {
                major: major.clone(),
                settings: given(settings),
                message: hostfacts::stopped::postgres_error_line(&e.to_string()),
            })
    };
    let size = computed("shared_memory_size")?;
    let size_kib =
        hostfacts::stopped::shared_memory_size_kib(&size).map_err(|e| SizingError::Refused {
            major: major.clone(),
            settings: given(settings),
            message: e.to_string(),
        })?;
    let pages = computed("shared_memory_size_in_huge_pages")?;
    let how = format!(
        "PostgreSQL {major}'s postgres -C on a scratch cluster, -c {}",
        given(&all).replace(' ', " -c ")
    );
    Ok(match pages.trim().parse::<i64>() {
        Ok(p) if p > 0 => Basis::Postgres {
            pages: p as u64,
            shared_memory_kib: Some(size_kib),
            how,
        },
        _ => Basis::PostgresSize {
            shared_memory_kib: size_kib,
            how,
        },
    })
}
