//! `bench pg`'s settings and tools: `huge_pages`, the load driver, the pooler, the query protocol, and
//! when the cluster's Pss is read.

names! {
    /// PostgreSQL's `huge_pages` setting.
    pub enum HugePages {
        /// 4 KB pages.
        Off = "off",
        /// Huge pages or refuse to start.
        On = "on",
        /// Huge pages when the pool has them, else 4 KB pages, silently (PostgreSQL's default).
        Try = "try",
    }
}

names! {
    /// The load driver.
    pub enum Driver {
        /// pgbench, from the PostgreSQL binaries the bench uses.
        Pgbench = "pgbench",
        /// sysbench 1.0's OLTP tests.
        Sysbench = "sysbench",
    }
}

names! {
    /// A pooler between the clients and the server.
    pub enum Pooler {
        /// pgbouncer in session mode.
        Pgbouncer = "pgbouncer",
    }
}

names! {
    /// The query protocol.
    pub enum Protocol {
        /// One round trip per statement, text in the query.
        Simple = "simple",
        /// Parse, bind and execute per statement.
        Extended = "extended",
        /// Statements prepared once per connection.
        Prepared = "prepared",
    }
}

names! {
    /// When the /proc samples read the cluster's Pss (reading it walks every backend's page tables).
    pub enum PssWhen {
        /// Once, a second before the measured run ends.
        End = "end",
        /// In every sample.
        Every = "every",
        /// Never.
        Never = "never",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases() {
        assert_eq!(HugePages::expected(), "off, on or try");
        assert_eq!(Driver::expected(), "pgbench or sysbench");
        assert_eq!(Pooler::expected(), "pgbouncer");
        assert_eq!(Protocol::expected(), "simple, extended or prepared");
        assert_eq!(PssWhen::expected(), "end, every or never");
        assert!(HugePages::Off < HugePages::On);
    }
}
