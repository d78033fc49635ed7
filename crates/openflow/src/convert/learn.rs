//! Nicira's `NXAST_LEARN` onto the classifier's `learn`, both ways, with
//! the checks Open vSwitch makes when a flow-mod adds it.

use sluice_classifier::learn::{flag as learn_flag, Learn, LearnDst, LearnSpec, LearnSrc};
use sluice_classifier::subfield::Subfield;
use sluice_classifier::Match;

use crate::action::OfAction;
use crate::consts::OfError;
use crate::nxm::{field_of_action_header, header_of, NxAction};

/// The classifier's `learn` of `NXAST_LEARN`, checked as OVS checks it
/// when a flow-mod adds it (`learn_check`, against the rule's match `m`).
pub(super) fn to_learn(l: &crate::nxm::NxLearn, m: Option<&Match>) -> Result<Learn, OfError> {
    use crate::nxm::{NxLearnDst, NxLearnSrc};
    let sub = |h: u32, ofs: u16, n_bits: u16| {
        let field = field_of_action_header(h).ok_or(OfError::BAD_ARGUMENT)?;
        if u32::from(ofs) + u32::from(n_bits) > field.bits() {
            return Err(OfError::BAD_ARGUMENT);
        }
        Ok(Subfield {
            field,
            ofs: ofs as u8,
            n_bits: n_bits as u8,
        })
    };
    let specs = l
        .specs
        .iter()
        .map(|s| {
            Ok(LearnSpec {
                src: match s.src {
                    NxLearnSrc::Field(h, ofs) => LearnSrc::Field(sub(h, ofs, s.n_bits)?),
                    NxLearnSrc::Imm(v) => LearnSrc::Imm(v),
                },
                dst: match s.dst {
                    NxLearnDst::Match(h, ofs) => LearnDst::Match(sub(h, ofs, s.n_bits)?),
                    NxLearnDst::Load(h, ofs) => LearnDst::Load(sub(h, ofs, s.n_bits)?),
                    NxLearnDst::Output => LearnDst::Output,
                },
                n_bits: u8::try_from(s.n_bits).map_err(|_| OfError::BAD_ARGUMENT)?,
            })
        })
        .collect::<Result<Vec<_>, OfError>>()?;
    let learn = Learn {
        table: l.table,
        priority: l.priority,
        idle_timeout: l.idle_timeout,
        hard_timeout: l.hard_timeout,
        fin_idle_timeout: l.fin_idle_timeout,
        fin_hard_timeout: l.fin_hard_timeout,
        cookie: l.cookie,
        flags: l.flags,
        limit: l.limit,
        result_dst: match l.result_dst {
            Some((h, ofs)) => Some(sub(h, ofs, 1)?),
            None => None,
        },
        specs,
    };
    if (learn.flags & learn_flag::WRITE_RESULT != 0) != learn.result_dst.is_some() {
        return Err(OfError::BAD_ARGUMENT);
    }
    // A spec whose prerequisites do not hold, as OVS: MATCH_INCONSISTENT.
    learn
        .check(m.unwrap_or(&Match::catch_all()))
        .map_err(|_| OfError::MATCH_INCONSISTENT)?;
    Ok(learn)
}

/// `NXAST_LEARN` of the classifier's `learn`.
pub(super) fn from_learn(l: &Learn) -> OfAction {
    use crate::nxm::{NxLearn, NxLearnDst, NxLearnSpec, NxLearnSrc};
    let hdr = |sf: &Subfield| (header_of(sf.field).unwrap_or(0), u16::from(sf.ofs));
    OfAction::Nx(NxAction::Learn(NxLearn {
        idle_timeout: l.idle_timeout,
        hard_timeout: l.hard_timeout,
        priority: l.priority,
        cookie: l.cookie,
        flags: l.flags,
        table: l.table,
        fin_idle_timeout: l.fin_idle_timeout,
        fin_hard_timeout: l.fin_hard_timeout,
        limit: l.limit,
        result_dst: l.result_dst.as_ref().map(hdr),
        specs: l
            .specs
            .iter()
            .map(|s| NxLearnSpec {
                src: match s.src {
                    LearnSrc::Field(sf) => {
                        let (h, o) = hdr(&sf);
                        NxLearnSrc::Field(h, o)
                    }
                    LearnSrc::Imm(v) => NxLearnSrc::Imm(v),
                },
                dst: match s.dst {
                    LearnDst::Match(sf) => {
                        let (h, o) = hdr(&sf);
                        NxLearnDst::Match(h, o)
                    }
                    LearnDst::Load(sf) => {
                        let (h, o) = hdr(&sf);
                        NxLearnDst::Load(h, o)
                    }
                    LearnDst::Output => NxLearnDst::Output,
                },
                n_bits: u16::from(s.n_bits),
            })
            .collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_classifier::parse::{parse_flow, Require};

    fn learn(line: &str) -> Learn {
        match &parse_flow(line, Require::Actions).unwrap().actions[0] {
            sluice_classifier::Action::Learn(l) => (**l).clone(),
            _ => unreachable!(),
        }
    }

    /// The action's body as it goes on the wire (after type and length),
    /// padded as the encoder pads it.
    fn body(nx: &NxAction) -> Vec<u8> {
        let mut b = Vec::new();
        nx.encode(&mut b);
        b.resize((b.len() + 4).div_ceil(8) * 8 - 4, 0);
        b
    }

    #[test]
    fn round_trips_through_the_wire() {
        let l = learn("ip,actions=learn(table=2,idle_timeout=10,hard_timeout=20,priority=7,cookie=0x5,send_flow_rem,delete_learned,dl_type=0x800,NXM_OF_IP_SRC[],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],reg0[0..3]=5,in_port=3,eth_type=0x86dd,ipv6_src=2001:db8::1,load:NXM_OF_IN_PORT[]->NXM_NX_REG1[0..15],load:0x2a->reg2[],output:NXM_OF_IN_PORT[])");
        let OfAction::Nx(nx) = from_learn(&l) else {
            unreachable!()
        };
        let b = body(&nx);
        assert_eq!((b.len() + 4) % 8, 0);
        let back = NxAction::decode(&b).unwrap().unwrap();
        assert_eq!(back, nx);
        let NxAction::Learn(ref w) = back else {
            unreachable!()
        };
        let mut m = Match::catch_all();
        m.set_exact(
            sluice_classifier::fields::field_by_name("dl_type").unwrap(),
            0x800,
        );
        assert_eq!(to_learn(w, Some(&m)).unwrap(), l);
        // Without `ip` in the rule, the source NXM_OF_IP_SRC[] lacks its
        // prerequisites, as OVS answers.
        assert_eq!(
            to_learn(w, Some(&Match::catch_all())),
            Err(OfError::MATCH_INCONSISTENT)
        );
    }

    #[test]
    fn refuses_malformed_actions() {
        let l = learn("actions=learn(NXM_OF_ETH_SRC[],load:0x2a->reg2[])");
        let OfAction::Nx(nx) = from_learn(&l) else {
            unreachable!()
        };
        let good = body(&nx);
        assert!(NxAction::decode(&good).is_ok());
        let bad = |at: usize, v: u8| {
            let mut b = good.clone();
            b[at] = v;
            NxAction::decode(&b)
        };
        // Offsets in the body: vendor 0..4, subtype 4..6, then the fields;
        // flags at 20, table at 22, pad at 23, specs from 28.
        assert_eq!(bad(21, 0x80), Err(OfError::BAD_ARGUMENT), "unknown flag");
        assert_eq!(bad(22, 255), Err(OfError::BAD_ARGUMENT), "table 255");
        assert_eq!(bad(23, 1), Err(OfError::BAD_ARGUMENT), "pad");
        assert_eq!(
            bad(28, 0x18),
            Err(OfError::BAD_ARGUMENT),
            "destination kind 3"
        );
        let last = good.len() - 1;
        assert_eq!(
            bad(last, 1),
            Err(OfError::BAD_ARGUMENT),
            "bytes after the specs"
        );
        // A constant with bits past its width.
        let k = learn("actions=learn(reg0[0..3]=5)");
        let OfAction::Nx(nx) = from_learn(&k) else {
            unreachable!()
        };
        let mut b = body(&nx);
        b[30] = 0x10; // the 2-byte constant's high byte: bit 12 of a 4-bit value
        assert_eq!(NxAction::decode(&b), Err(OfError::BAD_ARGUMENT));
        // Truncated.
        assert!(NxAction::decode(&good[..good.len() - 12]).is_err());
    }
}
