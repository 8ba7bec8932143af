//! A model request's body as it goes on the wire: the bytes rendered for this request, with the
//! parts rendered once per agent or process (the system message, the `tools` array, ~9.5 KB of
//! a 10.6 KB body with the built-in tools) kept as the shared buffers they live in. A request so
//! never copies them: the lean HTTP lane hands the pieces to one vectored write, and only the
//! rare paths that need one buffer (reqwest, the §4.6 repairs, tests) join them.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// The pieces of one body, in order; cloning shares them (a retry sends the same pieces).
#[derive(Clone, Debug)]
pub(crate) struct RequestBody {
    pieces: Arc<[Bytes]>,
    len: usize,
}

impl Default for RequestBody {
    fn default() -> Self {
        RequestBody::from(Bytes::new())
    }
}

impl From<Bytes> for RequestBody {
    fn from(b: Bytes) -> Self {
        RequestBody {
            len: b.len(),
            pieces: Arc::from([b]),
        }
    }
}

impl RequestBody {
    /// `own` with each `(at, bytes)` of `shared` inserted at offset `at` of it (offsets in
    /// order). The pieces of `own` are slices of its one buffer, not copies.
    pub(crate) fn spliced(own: Vec<u8>, shared: Vec<(usize, Bytes)>) -> Self {
        let own = Bytes::from(own);
        let mut pieces = Vec::with_capacity(2 * shared.len() + 1);
        let mut from = 0;
        for (at, bytes) in shared {
            if at > from {
                pieces.push(own.slice(from..at));
            }
            from = at;
            if !bytes.is_empty() {
                pieces.push(bytes);
            }
        }
        if from < own.len() || pieces.is_empty() {
            pieces.push(own.slice(from..));
        }
        let len = pieces.iter().map(Bytes::len).sum();
        RequestBody {
            pieces: pieces.into(),
            len,
        }
    }

    /// The pieces, in order (tests look at which are shared).
    #[cfg(test)]
    pub(crate) fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }

    /// The body in one buffer: shared when it is one piece, joined otherwise.
    pub(crate) fn to_bytes(&self) -> Bytes {
        if let [one] = &*self.pieces {
            return one.clone();
        }
        let mut out = Vec::with_capacity(self.len);
        for p in self.pieces.iter() {
            out.extend_from_slice(p);
        }
        Bytes::from(out)
    }

    /// The body for hyper: one data frame per piece, with its exact length (so the request
    /// carries `content-length`, as it did with one buffer).
    pub(crate) fn into_frames(self) -> Frames {
        Frames {
            remaining: self.len as u64,
            body: self,
            next: 0,
        }
    }
}

/// A [`RequestBody`] being sent.
pub(crate) struct Frames {
    body: RequestBody,
    next: usize,
    remaining: u64,
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let Some(piece) = this.body.pieces.get(this.next) else {
            return Poll::Ready(None);
        };
        this.next += 1;
        this.remaining -= piece.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(piece.clone()))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spliced_pieces_join_to_the_whole_and_share_the_inserted_buffers() {
        let tools = Bytes::from_static(b"[\"t\"]");
        let system = Bytes::from_static(b"{\"s\":1}");
        // {"m":[<system>],"tools":<tools>}
        let own = b"{\"m\":[],\"tools\":}".to_vec();
        let body = RequestBody::spliced(own, vec![(6, system.clone()), (16, tools.clone())]);
        assert_eq!(
            &body.to_bytes()[..],
            b"{\"m\":[{\"s\":1}],\"tools\":[\"t\"]}"
        );
        assert_eq!(body.len, body.to_bytes().len());
        let pieces: Vec<&[u8]> = body.pieces.iter().map(|p| &p[..]).collect();
        assert_eq!(
            pieces,
            [
                &b"{\"m\":["[..],
                b"{\"s\":1}",
                b"],\"tools\":",
                b"[\"t\"]",
                b"}"
            ]
        );
        assert_eq!(body.pieces[3].as_ptr(), tools.as_ptr(), "not copied");
        assert_eq!(body.pieces[1].as_ptr(), system.as_ptr(), "not copied");
    }

    #[test]
    fn edge_insertions_and_empty_pieces_leave_no_empty_frame() {
        let body = RequestBody::spliced(
            b"ab".to_vec(),
            vec![
                (0, Bytes::from_static(b"<")),
                (1, Bytes::new()),
                (2, Bytes::from_static(b">")),
            ],
        );
        assert_eq!(&body.to_bytes()[..], b"<ab>");
        assert!(body.pieces.iter().all(|p| !p.is_empty()));
        assert_eq!(
            &RequestBody::spliced(Vec::new(), Vec::new()).to_bytes()[..],
            b""
        );
    }

    #[test]
    fn frames_carry_every_piece_with_an_exact_length() {
        let body = RequestBody::spliced(b"xy".to_vec(), vec![(1, Bytes::from_static(b"123"))]);
        let mut frames = body.clone().into_frames();
        assert_eq!(frames.size_hint().exact(), Some(5));
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut sent = Vec::new();
        while let Poll::Ready(Some(Ok(f))) = Pin::new(&mut frames).poll_frame(&mut cx) {
            sent.extend_from_slice(&f.into_data().unwrap());
            assert_eq!(frames.size_hint().exact(), Some(5 - sent.len() as u64));
        }
        assert!(frames.is_end_stream());
        assert_eq!(sent, body.to_bytes());
    }
}
