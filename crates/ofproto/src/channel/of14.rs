//! An OpenFlow 1.4 or 1.5 connection: its messages are read as 1.3's
//! once [`sluice_openflow::of14::downgrade`] (or
//! [`sluice_openflow::of15::downgrade`]) has put them in 1.3's layout,
//! and everything written to it is put in its version's by the writer
//! ([`sluice_openflow::of14::upgrade`], [`sluice_openflow::of15::upgrade`]). Bundles are kept here: opened,
//! filled with flow-mods, group-mods and packet-outs (each checked as it
//! comes), closed, committed or discarded, as OpenFlow 1.4's
//! `BUNDLE_CONTROL` and `BUNDLE_ADD_MESSAGE` (what `ovs-ofctl --bundle`
//! and ovn-controller send). A commit applies the bundle's group-mods in
//! order, then all its flow-mods at once, atomically (none is applied if
//! one fails: the rules published in one new version), then its
//! packet-outs.

use std::collections::HashMap;

use sluice_openflow::consts::msg;
use sluice_openflow::convert::FlowModOp;
use sluice_openflow::msg::error_reply;
use sluice_openflow::of14::{self, bundle_ctrl, Bundle};
use sluice_openflow::of15;
use sluice_openflow::{frame_len, OfError};

use super::{Conn, Session, N_TABLES};
use crate::backend::BackendExt;

/// Most bundles open at once on one connection.
const MAX_BUNDLES: usize = 64;
/// Most messages in one bundle.
const MAX_MESSAGES: usize = 1 << 20;

/// A bundle being filled.
struct Open {
    flags: u16,
    closed: bool,
    /// Its flow-mods, read as they were added, each with its frame (in
    /// 1.3's layout) for its error.
    flow_mods: Vec<(FlowModOp, Vec<u8>)>,
    /// Its group-mods and packet-outs, in order, in 1.3's layout.
    others: Vec<Vec<u8>>,
}

impl Open {
    fn new(flags: u16) -> Open {
        Open {
            flags,
            closed: false,
            flow_mods: Vec::new(),
            others: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.flow_mods.len() + self.others.len()
    }
}

/// The connection's open bundles, by id.
#[derive(Default)]
pub(super) struct Bundles(HashMap<u32, Open>);

fn xid(frame: &[u8]) -> u32 {
    u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]])
}

impl<S: Conn> Session<S> {
    /// Handles every whole 1.4 message in `buf`; returns the bytes used.
    pub(super) fn handle_frames14(&mut self, buf: &[u8]) -> Result<usize, String> {
        let mut at = 0;
        let mut as13: Vec<u8> = Vec::new();
        while let Ok(Some(len)) = frame_len(&buf[at..]) {
            if at + len > buf.len() {
                break;
            }
            let frame = &buf[at..at + len];
            at += len;
            if matches!(frame[1], of14::BUNDLE_CONTROL | of14::BUNDLE_ADD_MESSAGE) {
                // What came before it goes first, in order.
                self.handle_frames13(&std::mem::take(&mut as13))?;
                self.bundle(frame)?;
                continue;
            }
            match self.downgrade(frame) {
                Ok(f) => as13.extend_from_slice(&f),
                Err(e) => {
                    self.handle_frames13(&std::mem::take(&mut as13))?;
                    self.reply(&error_reply(e, frame), xid(frame))?;
                }
            }
        }
        if let Err(e) = frame_len(&buf[at..]) {
            self.handle_frames13(&std::mem::take(&mut as13))?;
            let _ = self.reply(&error_reply(e, &buf[at..]), 0);
            return Err(format!("{e}: a message length under 8"));
        }
        self.handle_frames13(&as13)?;
        Ok(at)
    }

    /// A message of this connection's version in 1.3's layout.
    fn downgrade(&self, frame: &[u8]) -> Result<Vec<u8>, OfError> {
        if self.wire == of15::OFP15 {
            of15::downgrade(frame)
        } else {
            of14::downgrade(frame).map(|f| f.into_owned())
        }
    }

    fn bundle(&mut self, frame: &[u8]) -> Result<(), String> {
        let x = xid(frame);
        let fail = |s: &mut Self, e: OfError, f: &[u8]| s.reply(&error_reply(e, f), xid(f));
        match of14::parse_bundle(frame) {
            Err(e) => fail(self, e, frame),
            Ok(Bundle::Control { id, typ, flags }) => {
                let reply = |s: &mut Self, typ| {
                    let mut r = of14::bundle_reply(id, typ, flags, x);
                    r[0] = s.wire;
                    s.send(&r)
                };
                match typ {
                    bundle_ctrl::OPEN_REQUEST => {
                        if self.bundles.0.contains_key(&id) {
                            return fail(self, OfError::BUNDLE_EXIST, frame);
                        }
                        if self.bundles.0.len() >= MAX_BUNDLES {
                            return fail(self, OfError::BUNDLE_OUT_OF_BUNDLES, frame);
                        }
                        self.bundles.0.insert(id, Open::new(flags));
                        tracing::debug!(target: "openflow", "{}: bundle {id} opened", self.peer);
                        reply(self, bundle_ctrl::OPEN_REPLY)
                    }
                    bundle_ctrl::CLOSE_REQUEST => match self.bundles.0.get_mut(&id) {
                        None => fail(self, OfError::BUNDLE_BAD_ID, frame),
                        Some(b) if b.closed => fail(self, OfError::BUNDLE_CLOSED, frame),
                        Some(b) if b.flags != flags => fail(self, OfError::BUNDLE_BAD_FLAGS, frame),
                        Some(b) => {
                            b.closed = true;
                            reply(self, bundle_ctrl::CLOSE_REPLY)
                        }
                    },
                    bundle_ctrl::COMMIT_REQUEST => match self.bundles.0.remove(&id) {
                        None => fail(self, OfError::BUNDLE_BAD_ID, frame),
                        Some(b) if b.flags != flags => fail(self, OfError::BUNDLE_BAD_FLAGS, frame),
                        Some(b) => {
                            let t = std::time::Instant::now();
                            let n = b.flow_mods.len() + b.others.len();
                            let done = self.commit(b, frame)?;
                            tracing::debug!(
                                target: "openflow",
                                "{}: bundle {id} of {n} messages {} in {} us",
                                self.peer,
                                if done { "committed" } else { "refused" },
                                t.elapsed().as_micros()
                            );
                            if done {
                                reply(self, bundle_ctrl::COMMIT_REPLY)
                            } else {
                                Ok(())
                            }
                        }
                    },
                    bundle_ctrl::DISCARD_REQUEST => match self.bundles.0.remove(&id) {
                        None => fail(self, OfError::BUNDLE_BAD_ID, frame),
                        Some(_) => reply(self, bundle_ctrl::DISCARD_REPLY),
                    },
                    _ => fail(self, OfError::BUNDLE_BAD_TYPE, frame),
                }
            }
            Ok(Bundle::Add { id, flags, inner }) => {
                if self.is_slave() {
                    return fail(self, OfError::IS_SLAVE, frame);
                }
                if inner[0] != self.wire {
                    return fail(self, OfError::BAD_VERSION, frame);
                }
                if !matches!(inner[1], msg::FLOW_MOD | msg::GROUP_MOD | msg::PACKET_OUT) {
                    return fail(self, OfError::BUNDLE_MSG_UNSUP, frame);
                }
                let as13 = match self.downgrade(inner) {
                    Ok(f) => f,
                    Err(e) => return fail(self, e, frame),
                };
                // A flow-mod is read now (once): its error comes with its
                // add.
                let op = if as13[1] == msg::FLOW_MOD {
                    let read = self.flow_mods.read(&as13).map(|_| ());
                    match read.and_then(|()| self.flow_mods.op(N_TABLES)) {
                        Ok(op) => Some(op),
                        Err(e) => return fail(self, e, frame),
                    }
                } else {
                    None
                };
                // (A bundle added to before it is opened is opened, as
                // the spec says.)
                let b = self.bundles.0.entry(id).or_insert_with(|| Open::new(flags));
                let err = if b.closed {
                    Some(OfError::BUNDLE_CLOSED)
                } else if b.flags != flags {
                    Some(OfError::BUNDLE_BAD_FLAGS)
                } else if b.len() >= MAX_MESSAGES {
                    Some(OfError::BUNDLE_MSG_TOO_MANY)
                } else {
                    match op {
                        Some(op) => b.flow_mods.push((op, as13)),
                        None => b.others.push(as13),
                    }
                    None
                };
                match err {
                    Some(e) => fail(self, e, frame),
                    None => Ok(()),
                }
            }
        }
    }

    /// Applies a bundle's messages (group-mods, then the flow-mods at
    /// once, then packet-outs). False when a flow-mod failed: its error
    /// and `BUNDLE_FAILED/MSG_FAILED` for `commit` are sent, and no rule
    /// changed.
    fn commit(&mut self, b: Open, commit: &[u8]) -> Result<bool, String> {
        for m in b.others.iter().filter(|m| m[1] == msg::GROUP_MOD) {
            self.handle(m)?;
        }
        if !b.flow_mods.is_empty() {
            let (ops, frames): (Vec<FlowModOp>, Vec<Vec<u8>>) = b.flow_mods.into_iter().unzip();
            let (errs, removed) = self
                .control
                .apply_flow_mods_atomic(ops.into_iter().map(Ok))?;
            if let Some((i, e)) = errs.iter().enumerate().find_map(|(i, e)| e.map(|e| (i, e))) {
                let m = &frames[i];
                self.reply(&error_reply(e, m), xid(m))?;
                self.reply(
                    &error_reply(OfError::BUNDLE_MSG_FAILED, commit),
                    xid(commit),
                )?;
                return Ok(false);
            }
            self.tell_removed(&removed);
        }
        for m in b.others.iter().filter(|m| m[1] == msg::PACKET_OUT) {
            self.handle(m)?;
        }
        Ok(true)
    }
}
