//! `bench net`'s axes: the test and the path its traffic takes.

names! {
    /// A `bench net` test.
    pub enum NetTest {
        /// TCP bulk transfer.
        TcpStream = "tcp-stream",
        /// UDP datagrams as fast as they go.
        UdpStream = "udp-stream",
        /// TCP request/response round trips.
        TcpPingpong = "tcp-pingpong",
        /// UDP request/response round trips.
        UdpPingpong = "udp-pingpong",
    }
}

impl NetTest {
    /// TCP (else UDP).
    pub fn tcp(self) -> bool {
        matches!(self, NetTest::TcpStream | NetTest::TcpPingpong)
    }

    /// A stream (else ping-pong).
    pub fn stream(self) -> bool {
        matches!(self, NetTest::TcpStream | NetTest::UdpStream)
    }
}

names! {
    /// Where the traffic goes.
    pub enum NetPath {
        /// Over the loopback device.
        Loopback = "loopback",
        /// Over a veth pair between two network namespaces.
        Netns = "netns",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_say_their_protocol_and_shape() {
        assert!(NetTest::TcpStream.tcp() && NetTest::TcpStream.stream());
        assert!(!NetTest::UdpPingpong.tcp() && !NetTest::UdpPingpong.stream());
        assert_eq!(
            NetTest::expected(),
            "tcp-stream, udp-stream, tcp-pingpong or udp-pingpong"
        );
        assert_eq!(serde_json::to_string(&NetPath::Netns).unwrap(), "\"netns\"");
    }
}
