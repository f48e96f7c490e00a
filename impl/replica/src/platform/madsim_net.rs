//! madsim's TCP in the shape of tokio's (`crate::platform::net` under the
//! `madsim` feature). madsim's stream has no `into_split`, and it sends
//! what was written only on `flush` (a real socket sends as it is written):
//! the halves here split with `tokio::io::split`, and every write is
//! flushed at once, so the node's code, written for tokio's sockets,
//! behaves under madsim as it does on a real network.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::ToSocketAddrs;

type Inner = tokio::net::TcpStream;

pub struct TcpListener(tokio::net::TcpListener);

impl TcpListener {
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        tokio::net::TcpListener::bind(addr).await.map(TcpListener)
    }

    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (s, a) = self.0.accept().await?;
        Ok((TcpStream(s), a))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

pub struct TcpStream(Inner);

impl TcpStream {
    pub async fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        Inner::connect(addr).await.map(TcpStream)
    }

    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.0.set_nodelay(nodelay)
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let (r, w) = tokio::io::split(self.0);
        (OwnedReadHalf(r), OwnedWriteHalf(w))
    }
}

/// Writes `buf` through `w` and flushes it (madsim sends on flush only).
fn write_through<W: AsyncWrite + Unpin>(
    w: &mut W,
    cx: &mut Context<'_>,
    buf: &[u8],
) -> Poll<io::Result<usize>> {
    let n = ready!(Pin::new(&mut *w).poll_write(cx, buf))?;
    // The bytes are taken: report them even if the flush must wait (the
    // next write or flush sends them). madsim's flush does not wait.
    if let Poll::Ready(Err(e)) = Pin::new(w).poll_flush(cx) {
        return Poll::Ready(Err(e));
    }
    Poll::Ready(Ok(n))
}

impl AsyncRead for TcpStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        write_through(&mut self.0, cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

pub struct OwnedReadHalf(ReadHalf<Inner>);

impl AsyncRead for OwnedReadHalf {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

pub struct OwnedWriteHalf(WriteHalf<Inner>);

impl AsyncWrite for OwnedWriteHalf {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        write_through(&mut self.0, cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
