//! A huge page sizing plan as text, with what applying it did.

use results::host::hugepages::Plan;
use results::host::Bytes;
use results::hugepages::SizedPlan;

use crate::markup::{command_field, field, Style};

/// Renders a plan for `width` columns.
pub fn render(title: &str, p: &Plan, style: Style, width: usize) -> String {
    let mut o = String::new();
    // Its own pages first; the host's pool, when other users' pages make it more, said as such (it was
    // the headline alone, another cluster's pages in it unsaid: issue 46 item 3).
    let size = Bytes::from_kib(p.page_size_kib);
    let head = match p.pool_target > p.pages_needed {
        true => format!(
            "{title}: {} pages of {size}; this host's pool: {} ({} for its other users)",
            p.pages_needed,
            p.pool_target,
            p.pool_target - p.pages_needed
        ),
        false => format!("{title}: {} pages of {size}", p.pages_needed),
    };
    o.push_str(&style.bold(&crate::markup::wrap(&head, width, 0, 2)));
    o.push('\n');
    for (i, line) in p.arithmetic.iter().enumerate() {
        o.push_str(&field(if i == 0 { "arithmetic" } else { "" }, line, width));
    }
    o.push_str(&field(
        "margin",
        &format!("{} pages: {}", p.margin_pages, p.margin_reason),
        width,
    ));
    if let Some(pool) = &p.pool_now {
        o.push_str(&field(
            "pool now",
            &format!(
                "total {}, free {}, reserved {}, surplus {}",
                pool.total, pool.free, pool.reserved, pool.surplus
            ),
            width,
        ));
    } else {
        o.push_str(&field(
            "pool now",
            "this host has no pool of that size",
            width,
        ));
    }
    o.push_str(&field(
        "pins",
        &format!(
            "{} of RAM, unavailable to anything else",
            Bytes::from_kib(p.pinned_kib)
        ),
        width,
    ));
    for (i, line) in p.sysctl_lines.iter().enumerate() {
        o.push_str(&command_field(
            if i == 0 { "kernel" } else { "" },
            line,
            width,
        ));
    }
    for (i, line) in p.postgresql_conf_lines.iter().enumerate() {
        o.push_str(&command_field(
            if i == 0 { "postgresql" } else { "" },
            line,
            width,
        ));
    }
    o.push_str(&field(
        "then",
        "restart PostgreSQL; preemptlab audit should show 'on huge pages: yes'",
        width,
    ));
    o
}

/// Renders a sized target: its plan, what applying it did (if asked), and a blank line.
pub fn render_sized(s: &SizedPlan, style: Style, width: usize) -> String {
    let mut o = render(&s.target, &s.plan, style, width);
    if let Some(a) = &s.applied {
        if a.obtained >= a.requested && a.before >= a.requested {
            o.push_str(&format!(
                "  applied      pool already holds {} >= {} pages: unchanged\n",
                a.before, a.requested
            ));
        } else if a.obtained >= a.requested {
            o.push_str(&format!(
                "  applied      {}: {} -> {} pages (asked {})\n",
                a.path, a.before, a.obtained, a.requested
            ));
        } else {
            o.push_str(&format!(
                "  applied      {}: {} -> {} pages, SHORT of {} (memory too fragmented: reserve at boot with hugepages= on the kernel command line, or drop caches and compact, then retry)\n",
                a.path, a.before, a.obtained, a.requested
            ));
        }
    }
    o.push('\n');
    o
}
