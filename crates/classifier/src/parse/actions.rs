//! The `actions=` part of a rule line.

use sluice_packet::wire::ethernet::{ethertype, is_mpls};

use crate::action::{Action, OFPP_LOCAL, OFPP_MAX};
use crate::fields::{field_by_name, Field, Prereq};
use crate::flow_match::Match;

use super::matches::{f, unknown_field_message};
use super::values::{parse_int, parse_ipv4, parse_mac, parse_masked, parse_table};
use super::{split_actions, FlowSpec, LineCtx, ParseError};
use crate::subfield::Subfield;

fn parse_port(cx: &LineCtx, v: &str, at: usize) -> Result<Action, ParseError> {
    match v.to_ascii_lowercase().as_str() {
        "in_port" => return Ok(Action::InPort),
        "all" => return Ok(Action::All),
        "flood" => return Ok(Action::Flood),
        "controller" => return Ok(Action::controller(65535)),
        "normal" => return Ok(Action::Normal),
        "local" => return Ok(Action::Output(OFPP_LOCAL)),
        _ => {}
    }
    let p = parse_int(cx, v, at, 32, "output port")? as u32;
    if p == 0 || p > OFPP_MAX {
        return Err(cx.err(
            at,
            format!("{p} is not a valid output port (1 to {OFPP_MAX})"),
        ));
    }
    Ok(Action::Output(p))
}

pub(super) fn parse_actions(
    cx: &LineCtx,
    text: &str,
    base: usize,
    spec: &FlowSpec,
) -> Result<Vec<Action>, ParseError> {
    let toks = split_actions(text, base);
    if toks.len() == 1 && (toks[0].text.is_empty() || toks[0].text.eq_ignore_ascii_case("drop")) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    // The VLAN tags the packet is known to carry at this point of the action
    // list (for set_field on VLAN fields, and at most two, as OVS checks).
    let m = &spec.matcher;
    // The match as the actions so far leave the packet's type (push_mpls,
    // pop_mpls, push_pbb and pop_pbb change it), for the prerequisites of
    // the actions after them.
    let mut cur = *m;
    let mut tags = u8::from(Prereq::Vlan.holds(&m.value, &m.mask));
    let mut last_stage = 0;
    let third_tag = |at: usize| {
        cx.err(
            at,
            "push_vlan onto the two VLAN tags this rule already guarantees: a flow holds at most two (OVS refuses it too: OFPBAC_BAD_TAG)",
        )
    };
    for tok in &toks {
        let t = tok.text;
        if t.is_empty() {
            return Err(cx.err(tok.at, "empty action: remove the extra comma"));
        }
        if t.eq_ignore_ascii_case("drop") {
            return Err(cx.err(tok.at, "'drop' must be the only action"));
        }
        if let Some(Action::GotoTable(_)) = out.last() {
            return Err(cx.err(tok.at, "goto_table must be the last action"));
        }
        let (name, arg, arg_at) = split_action(t, tok.at);
        // OpenFlow 1.1+ instructions come in their order: apply-actions
        // (the plain actions), clear_actions, write_actions,
        // write_metadata, goto_table.
        let stage = match name.to_ascii_lowercase().as_str() {
            "meter" => 0,
            "clear_actions" => 2,
            "write_actions" => 3,
            "write_metadata" => 4,
            "goto_table" => 5,
            _ => 1,
        };
        if stage == 0 && !out.is_empty() {
            return Err(cx.err(
                tok.at,
                "meter:N must come first (OpenFlow runs the meter instruction before the actions)",
            ));
        }
        if stage < last_stage || (stage == last_stage && stage > 1) {
            return Err(cx.err(
                tok.at,
                "invalid instruction order: plain (apply) actions, then clear_actions, then write_actions, then write_metadata, then goto_table, each instruction once (as ovs-ofctl asks for OpenFlow 1.1+)",
            ));
        }
        last_stage = stage;
        let need = || {
            arg.ok_or_else(|| cx.err(tok.at, format!("'{name}' needs an argument ('{name}:...')")))
        };
        let setf = |fname: &'static str,
                    legacy: &'static str,
                    parse: &dyn Fn() -> Result<u128, ParseError>|
         -> Result<Action, ParseError> {
            let field = f(fname);
            // OpenFlow 1.0 actions load whatever the match says and act
            // per packet (Field::legacy_prereq), as ovs-ofctl takes them.
            Ok(Action::SetField {
                field,
                value: parse()?,
                legacy: Some(legacy),
            })
        };
        let a = match name.to_ascii_lowercase().as_str() {
            "output" => {
                let a = need()?;
                // A field (output:NXM_NX_REG0[0..15], output:reg1) or a port.
                if a.contains('[') || crate::fields::field_by_name(a).is_some() {
                    let src = Subfield::parse(a).map_err(|e| cx.err(arg_at, e))?;
                    if !src.field.prereq.holds(&cur.value, &cur.mask) {
                        return Err(cx.err(arg_at, format!("output from {} requires the rule to match {}", src.field.name, src.field.prereq.describe())));
                    }
                    Action::OutputReg(src)
                } else {
                    parse_port(cx, a, arg_at)?
                }
            }
            "note" => {
                let a = arg.unwrap_or("");
                let mut bytes = super::values::hex_bytes(a)
                    .ok_or_else(|| cx.err(arg_at, format!("note:{a}: expected hex bytes, e.g. note:01.02.ab")))?;
                // NXAST_NOTE's 10 bytes of header and the note: a multiple
                // of 8, the rest zeros (as ovs-ofctl pads it).
                bytes.resize((10 + bytes.len()).div_ceil(8) * 8 - 10, 0);
                Action::Note(bytes)
            }
            "group" => {
                let g = parse_int(cx, need()?, arg_at, 32, "group")? as u32;
                if g > crate::group::GROUP_MAX {
                    return Err(cx.err(arg_at, format!("group {g} is out of range (0 to {})", crate::group::GROUP_MAX)));
                }
                Action::Group(g)
            }
            "in_port" | "all" | "flood" | "normal" | "local" if arg.is_none() => parse_port(cx, name, tok.at)?,
            "controller" => match arg {
                None => Action::controller(65535),
                Some(a) if !a.contains('=') => Action::controller(parse_int(cx, a, arg_at, 16, "controller max_len")? as u16),
                Some(a) => super::controller::parse_controller(cx, a, arg_at)?,
            },
            "mod_dl_src" => setf("dl_src", "mod_dl_src", &|| parse_mac(cx, need()?, arg_at, "mod_dl_src"))?,
            "mod_dl_dst" => setf("dl_dst", "mod_dl_dst", &|| parse_mac(cx, need()?, arg_at, "mod_dl_dst"))?,
            "mod_nw_src" => setf("nw_src", "mod_nw_src", &|| parse_ipv4(cx, need()?, arg_at, "mod_nw_src"))?,
            "mod_nw_dst" => setf("nw_dst", "mod_nw_dst", &|| parse_ipv4(cx, need()?, arg_at, "mod_nw_dst"))?,
            "mod_nw_tos" => setf("nw_tos", "mod_nw_tos", &|| {
                let v = parse_int(cx, need()?, arg_at, 8, "mod_nw_tos")?;
                if v & 3 != 0 {
                    return Err(cx.err(arg_at, format!("{v} is not a valid TOS: mod_nw_tos sets DSCP bits only (a multiple of 4)")));
                }
                Ok(v)
            })?,
            "mod_nw_ecn" => setf("ip_ecn", "mod_nw_ecn", &|| parse_int(cx, need()?, arg_at, 2, "mod_nw_ecn"))?,
            "mod_nw_ttl" => setf("nw_ttl", "mod_nw_ttl", &|| parse_int(cx, need()?, arg_at, 8, "mod_nw_ttl"))?,
            "mod_tp_src" => setf("tp_src", "mod_tp_src", &|| parse_int(cx, need()?, arg_at, 16, "mod_tp_src"))?,
            "mod_tp_dst" => setf("tp_dst", "mod_tp_dst", &|| parse_int(cx, need()?, arg_at, 16, "mod_tp_dst"))?,
            "dec_ttl" => match arg {
                // `dec_ttl()`, as ovs-ofctl prints a decrement that names
                // no controller: OVS reads it back as plain `dec_ttl`.
                None => Action::DecTtl,
                Some(a) if a.trim().is_empty() => Action::DecTtl,
                Some(a) => {
                    let ids = a
                        .split(',')
                        .map(|id| parse_int(cx, id.trim(), arg_at, 16, "a dec_ttl controller id").map(|v| v as u16))
                        .collect::<Result<Vec<u16>, _>>()?;
                    Action::DecTtlIds(ids)
                }
            },
            // OpenFlow 1.3 has no "set the VID, pushing a tag if there is
            // none": ovs-ofctl -O OpenFlow13 sends push_vlan:0x8100 before
            // the set where the rule does not guarantee a tag at this point
            // (so a tagged packet gets a second tag), and so does Sluice.
            "mod_vlan_vid" | "set_vlan_vid" => {
                let v = parse_int(cx, need()?, arg_at, 16, name)?;
                if v > 4095 {
                    return Err(cx.err(arg_at, format!("VLAN id {v} is out of range (0 to 4095)")));
                }
                if tags == 0 {
                    out.push(Action::PushVlan(ethertype::VLAN_8021Q));
                    tags = 1;
                }
                Action::ModVlanVid(v as u16)
            }
            "mod_vlan_pcp" | "set_vlan_pcp" => {
                let p = parse_int(cx, need()?, arg_at, 3, name)? as u8;
                if tags == 0 {
                    out.push(Action::PushVlan(ethertype::VLAN_8021Q));
                    tags = 1;
                }
                Action::ModVlanPcp(p)
            }
            "push_vlan" => {
                let tpid = parse_int(cx, need()?, arg_at, 16, "push_vlan")? as u16;
                if tpid != ethertype::VLAN_8021Q && tpid != ethertype::VLAN_8021AD {
                    return Err(cx.err(arg_at, format!("push_vlan takes 0x8100 or 0x88a8, not {tpid:#06x}")));
                }
                if tags == 2 {
                    return Err(third_tag(tok.at));
                }
                tags += 1;
                Action::PushVlan(tpid)
            }
            "strip_vlan" | "pop_vlan" if arg.is_none() => {
                tags = tags.saturating_sub(1);
                Action::PopVlan
            }
            "set_field" => {
                let a = need()?;
                let Some((val, fname)) = a.split_once("->") else {
                    return Err(cx.err(arg_at, "set_field needs 'VALUE->FIELD', e.g. set_field:10.0.0.1->ip_dst"));
                };
                let fat = arg_at + val.len() + 2;
                let Some(field) = field_by_name(fname.trim()) else {
                    return Err(cx.err(fat, unknown_field_message(fname.trim())));
                };
                // eth_type, ip_proto and mpls_bos parse; a rule set in
                // Open vSwitch's mode refuses them when the rule is added.
                if !field.spec_writable() {
                    return Err(cx.err(fat, format!("{} cannot be set", field.name)));
                }
                let (value, mask) = parse_masked(cx, field, val.trim(), arg_at)?;
                if mask != field.full_mask() {
                    // OVS's masked set_field, which it shows as the loads
                    // of the mask's runs of bits.
                    out.push(load_action(cx, Subfield::whole(field), value & mask, mask, &cur, tok.at)?);
                    continue;
                }
                if field.prereq == Prereq::Vlan || field.name == "vlan_vid" {
                    if tags == 0 {
                        return Err(cx.err(tok.at, format!("set_field on {} needs a VLAN tag: match one (e.g. dl_vlan=10) or push_vlan first", field.name)));
                    }
                } else {
                    check_action_prereq(cx, field, &cur, tok.at, "set_field")?;
                }
                if field.name == "nw_tos" && value & 3 != 0 {
                    return Err(cx.err(arg_at, format!("{value} is not a valid TOS: nw_tos sets DSCP bits only")));
                }
                Action::SetField { field, value, legacy: None }
            }
            "load" => {
                let a = need()?;
                let Some((val, dst)) = a.split_once("->") else {
                    return Err(cx.err(arg_at, "load needs 'VALUE->FIELD[BITS]', e.g. load:0x1->NXM_NX_REG0[0..15]"));
                };
                let dat = arg_at + val.len() + 2;
                let sf = Subfield::parse(dst).map_err(|e| cx.err(dat, e))?;
                let v = parse_int(cx, val.trim(), arg_at, u32::from(sf.n_bits), &format!("load into {sf}"))?;
                load_action(cx, sf, sf.place(v), sf.mask(), &cur, tok.at)?
            }
            "bundle" | "bundle_load" => {
                let a = need()?;
                let load = name.eq_ignore_ascii_case("bundle_load");
                let lower = a.to_ascii_lowercase();
                let Some(at) = lower.find("members:").or_else(|| lower.find("slaves:")) else {
                    return Err(cx.err(arg_at, format!("{name} needs members:PORT,..., e.g. {name}(eth_src,0,hrw,ofport,{}members:1,2)", if load { "NXM_NX_REG0[0..15]," } else { "" })));
                };
                let (head, list) = (&a[..at], &a[at..]);
                let list = &list[list.find(':').expect("a colon") + 1..];
                let parts: Vec<&str> = head.split([',', ' ']).filter(|p| !p.is_empty()).collect();
                let want = if load { 5 } else { 4 };
                if parts.len() != want {
                    return Err(cx.err(arg_at, format!("{name} needs FIELDS,BASIS,ALGORITHM,ofport,{}members:PORT,...", if load { "DST," } else { "" })));
                }
                use crate::bundle::{Bundle, BundleAlgorithm};
                let fields = crate::multipath::HashFields::named(parts[0]).ok_or_else(|| cx.err(arg_at, format!("{name}: unknown fields '{}'", parts[0])))?;
                let basis = parse_int(cx, parts[1], arg_at, 16, "bundle's basis")? as u16;
                let algorithm = BundleAlgorithm::named(parts[2]).ok_or_else(|| cx.err(arg_at, format!("{name}: unknown algorithm '{}': expected active_backup or hrw", parts[2])))?;
                if !parts[3].eq_ignore_ascii_case("ofport") {
                    return Err(cx.err(arg_at, format!("{name}: unknown member type '{}': expected ofport", parts[3])));
                }
                let mut members = Vec::new();
                for m in list.split([',', ' ', '[', ']']).filter(|m| !m.is_empty()) {
                    let p = parse_int(cx, m, arg_at, 16, "a bundle member")? as u32;
                    if p == 0 || p >= 0xff00 {
                        return Err(cx.err(arg_at, format!("{name}: member {p} is not a port number (1 to 65279)")));
                    }
                    members.push(p);
                }
                let dst = if load {
                    let d = Subfield::parse(parts[4]).map_err(|e| cx.err(arg_at, e))?;
                    check_loadable(cx, d.field, &cur, arg_at, "bundle_load")?;
                    Some(d)
                } else {
                    None
                };
                Action::Bundle(Box::new(Bundle { fields, basis, algorithm, members, dst }))
            }
            "fin_timeout" => {
                let (mut idle, mut hard) = (0u16, 0u16);
                for kv in arg.unwrap_or("").split(',').map(str::trim).filter(|k| !k.is_empty()) {
                    match kv.split_once('=') {
                        Some(("idle_timeout", v)) => idle = parse_int(cx, v, arg_at, 16, "fin_timeout's idle_timeout")? as u16,
                        Some(("hard_timeout", v)) => hard = parse_int(cx, v, arg_at, 16, "fin_timeout's hard_timeout")? as u16,
                        _ => return Err(cx.err(arg_at, format!("fin_timeout: unknown setting '{kv}': expected idle_timeout=N or hard_timeout=N"))),
                    }
                }
                Action::FinTimeout { idle, hard }
            }
            "check_pkt_larger" => {
                let a = need()?;
                let Some((len, dst)) = a.split_once(")->") else {
                    return Err(cx.err(arg_at, "check_pkt_larger needs 'check_pkt_larger(LEN)->DST', e.g. check_pkt_larger(1500)->NXM_NX_REG0[0]"));
                };
                let len = parse_int(cx, len.trim(), arg_at, 16, "check_pkt_larger's length")? as u16;
                let dat = arg_at + a.len() - dst.len();
                let dst = Subfield::parse(dst.trim()).map_err(|e| cx.err(dat, e))?;
                if dst.n_bits != 1 {
                    return Err(cx.err(dat, "check_pkt_larger: only a 1-bit destination field is allowed, e.g. NXM_NX_REG0[0]"));
                }
                check_loadable(cx, dst.field, &cur, dat, "check_pkt_larger")?;
                Action::CheckPktLarger { len, dst }
            }
            "multipath" => {
                // OVS's order: fields, basis, algorithm, n_links, arg, dst.
                let a = need()?;
                let parts: Vec<&str> = a.split([',', ' ']).filter(|p| !p.is_empty()).collect();
                let [fields, basis, alg, n_links, marg, dst] = parts[..] else {
                    return Err(cx.err(arg_at, "multipath needs FIELDS,BASIS,ALGORITHM,N_LINKS,ARG,DST, e.g. multipath(symmetric_l4,1024,hrw,4,0,NXM_NX_REG0[0..1])"));
                };
                use crate::multipath::{Algorithm, HashFields, Multipath};
                let fields = HashFields::named(fields).ok_or_else(|| cx.err(arg_at, format!("multipath: unknown fields '{fields}': expected eth_src, symmetric_l4, symmetric_l3l4, symmetric_l3l4+udp, nw_src, nw_dst or symmetric_l3")))?;
                let algorithm = Algorithm::named(alg).ok_or_else(|| cx.err(arg_at, format!("multipath: unknown algorithm '{alg}': expected modulo_n, hash_threshold, hrw or iter_hash")))?;
                let basis = parse_int(cx, basis, arg_at, 16, "multipath's basis")? as u16;
                let n = parse_int(cx, n_links, arg_at, 17, "multipath's n_links")?;
                if !(1..=65536).contains(&n) {
                    return Err(cx.err(arg_at, format!("multipath: n_links {n} is not in valid range 1 to 65536")));
                }
                let marg = parse_int(cx, marg, arg_at, 32, "multipath's arg")? as u32;
                let dst = Subfield::parse(dst).map_err(|e| cx.err(arg_at, e))?;
                if dst.n_bits < 16 && n > 1u128 << dst.n_bits {
                    return Err(cx.err(arg_at, format!("multipath: {}-bit destination field has {} possible values, less than specified n_links {n}", dst.n_bits, 1u32 << dst.n_bits)));
                }
                check_loadable(cx, dst.field, &cur, arg_at, "multipath")?;
                Action::Multipath(Box::new(Multipath {
                    fields,
                    basis,
                    algorithm,
                    max_link: (n - 1) as u16,
                    arg: marg,
                    dst,
                }))
            }
            op @ ("push" | "pop") => {
                let sf = Subfield::parse(need()?).map_err(|e| cx.err(arg_at, e))?;
                if op == "pop" {
                    check_loadable(cx, sf.field, &cur, arg_at, "pop")?;
                } else if !sf.field.prereq.holds(&cur.value, &cur.mask) {
                    return Err(cx.err(arg_at, format!("push of {} requires the rule to match {}", sf.field.name, sf.field.prereq.describe())));
                }
                Action::Stack { pop: op == "pop", sf }
            }
            "move" => {
                let a = need()?;
                let Some((src, dst)) = a.split_once("->") else {
                    return Err(cx.err(arg_at, "move needs 'SRC[BITS]->DST[BITS]', e.g. move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]"));
                };
                let dat = arg_at + src.len() + 2;
                let src = Subfield::parse(src).map_err(|e| cx.err(arg_at, e))?;
                let dst = Subfield::parse(dst).map_err(|e| cx.err(dat, e))?;
                if src.n_bits != dst.n_bits {
                    return Err(cx.err(arg_at, format!("source field {src} is {} bits wide but destination {dst} is {} bits wide", src.n_bits, dst.n_bits)));
                }
                if !src.field.prereq.holds(&cur.value, &cur.mask) {
                    return Err(cx.err(arg_at, format!("move from {} requires the rule to match {}", src.field.name, src.field.prereq.describe())));
                }
                check_loadable(cx, dst.field, &cur, dat, "move")?;
                Action::Move { src, dst }
            }
            "ct" => {
                Action::Ct(crate::ct::Ct::parse(arg.unwrap_or("")).map_err(|e| cx.err(arg_at, e))?)
            }
            "ct_clear" if arg.is_none() => Action::CtClear,
            "push_mpls" => {
                let t = parse_int(cx, need()?, arg_at, 16, "push_mpls")? as u16;
                if !is_mpls(t) {
                    return Err(cx.err(arg_at, format!("push_mpls takes 0x8847 or 0x8848, not {t:#06x}")));
                }
                cur.set_exact(f("dl_type"), t.into());
                Action::PushMpls(t)
            }
            "pop_mpls" => {
                let t = parse_int(cx, need()?, arg_at, 16, "pop_mpls")? as u16;
                if !Prereq::Mpls.holds(&cur.value, &cur.mask) {
                    return Err(cx.err(tok.at, "pop_mpls requires the packet to be MPLS here: match 'mpls' (or 'mplsm') or push_mpls first"));
                }
                cur.set_exact(f("dl_type"), t.into());
                Action::PopMpls(t)
            }
            "push_pbb" => {
                let t = parse_int(cx, need()?, arg_at, 16, "push_pbb")? as u16;
                if t != ethertype::PBB {
                    return Err(cx.err(arg_at, format!("push_pbb takes 0x88e7, not {t:#06x}")));
                }
                cur.set_exact(f("dl_type"), t.into());
                Action::PushPbb(t)
            }
            "pop_pbb" if arg.is_none() => {
                if !Prereq::Pbb.holds(&cur.value, &cur.mask) {
                    return Err(cx.err(tok.at, "pop_pbb requires the packet to be PBB here: match dl_type=0x88e7 or push_pbb first"));
                }
                // The customer frame's type is not known until it is parsed.
                cur.set(f("dl_type"), 0, 0);
                Action::PopPbb
            }
            "set_mpls_label" => setf("mpls_label", "set_mpls_label", &|| parse_int(cx, need()?, arg_at, 20, "set_mpls_label"))?,
            "set_mpls_tc" => setf("mpls_tc", "set_mpls_tc", &|| parse_int(cx, need()?, arg_at, 3, "set_mpls_tc"))?,
            "meter" => {
                let m = parse_int(cx, need()?, arg_at, 32, "meter")? as u32;
                if m == 0 || m > crate::meter::METER_MAX {
                    return Err(cx.err(arg_at, format!("meter {m} is out of range (1 to {})", crate::meter::METER_MAX)));
                }
                Action::Meter(m)
            }
            "set_mpls_ttl" => Action::SetMplsTtl(parse_int(cx, need()?, arg_at, 8, "set_mpls_ttl")? as u8),
            "dec_mpls_ttl" if arg.is_none() => Action::DecMplsTtl,
            "copy_ttl_out" if arg.is_none() => Action::CopyTtlOut,
            "copy_ttl_in" if arg.is_none() => Action::CopyTtlIn,
            "resubmit" => parse_resubmit(cx, t, arg, arg_at)?,
            "write_actions" => {
                let inner = parse_actions(cx, need()?, arg_at, spec)?;
                if let Some(bad) = inner.iter().find(|a| {
                    matches!(
                        a,
                        Action::WriteActions(_)
                            | Action::ClearActions
                            | Action::WriteMetadata { .. }
                            | Action::GotoTable(_)
                            | Action::Resubmit { .. }
                            | Action::Load { .. }
                            | Action::Move { .. }
                            | Action::Stack { .. }
                            | Action::Ct(_)
                            | Action::CtClear
                            | Action::Conjunction { .. }
                    )
                }) {
                    return Err(cx.err(arg_at, format!("{bad} cannot be in an action set")));
                }
                Action::WriteActions(inner)
            }
            "clone" => {
                let inner = parse_actions(cx, need()?, arg_at, spec)?;
                if let Some(bad) = inner.iter().find(|a| a.refused_in_clone()) {
                    return Err(cx.err(
                        arg_at,
                        format!("{bad} cannot be in a clone here (instructions, and ct: its state would leak out of the copy)"),
                    ));
                }
                Action::Clone(inner)
            }
            "conjunction" => conjunction(cx, need()?, arg_at)?,
            "sample" => Action::Sample(sample(cx, arg.unwrap_or(""), arg_at)?),
            "set_queue" => Action::SetQueue(parse_int(cx, need()?, arg_at, 32, "set_queue")? as u32),
            "pop_queue" if arg.is_none() => Action::PopQueue,
            "enqueue" => {
                // OpenFlow 1.0's enqueue:PORT:QUEUE is, from 1.1 on (and
                // as OVS keeps it), set_queue, output, pop_queue.
                let a = need()?;
                let (p, q) = a.split_once([':', ',']).ok_or_else(|| cx.err(arg_at, "enqueue needs PORT:QUEUE, e.g. enqueue:1:2"))?;
                let port = parse_port(cx, p.trim(), arg_at)?;
                let queue = parse_int(cx, q.trim(), arg_at, 32, "enqueue's queue")? as u32;
                out.push(Action::SetQueue(queue));
                out.push(port);
                Action::PopQueue
            }
            "learn" => Action::Learn(Box::new(super::learn::parse_learn(cx, arg.unwrap_or(""), arg_at, &cur)?)),
            "clear_actions" if arg.is_none() => Action::ClearActions,
            "write_metadata" => {
                let a = need()?;
                let (v, m) = match a.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (a, None),
                };
                let value = parse_int(cx, v, arg_at, 64, "write_metadata")? as u64;
                let mask = match m {
                    Some(m) => parse_int(cx, m, arg_at, 64, "write_metadata's mask")? as u64,
                    None => u64::MAX,
                };
                Action::WriteMetadata { value, mask }
            }
            "goto_table" => {
                let tid = parse_table(cx, need()?, arg_at)?;
                if tid <= spec.table {
                    return Err(cx.err(arg_at, format!("goto_table:{tid} must go to a later table than this rule's table {}", spec.table)));
                }
                Action::GotoTable(tid)
            }
            _ if name.bytes().all(|b| b.is_ascii_digit()) && arg.is_none() => parse_port(cx, name, tok.at)?,
            _ => {
                return Err(cx.err(tok.at, format!(
                    "unknown action '{name}': expected output:N, in_port, all, flood, controller, drop, mod_dl_src/dst, mod_nw_src/dst, mod_nw_tos, mod_tp_src/dst, dec_ttl, mod_vlan_vid, mod_vlan_pcp, push_vlan, strip_vlan, push_mpls, pop_mpls, set_mpls_label/tc/ttl, dec_mpls_ttl, copy_ttl_out/in, push_pbb, pop_pbb, set_field:V[/M]->F, load:V->F[BITS], move:F[BITS]->F[BITS], ct(...), ct_clear, resubmit(,T), goto_table:T, write_actions(...), write_metadata:V[/M] or clear_actions"
                )))
            }
        };
        out.push(a);
    }
    let conj = |a: &Action| matches!(a, Action::Conjunction { .. });
    if out.iter().any(conj) {
        if let Some(other) = out
            .iter()
            .find(|a| !conj(a) && !matches!(a, Action::Note(_)))
        {
            return Err(cx.err(
                base,
                format!("\"conjunction\" actions may be used along with \"note\" but not any other kind of action (such as \"{other}\" here)"),
            ));
        }
    }
    Ok(out)
}

/// `sample(probability=N,collector_set_id=N,obs_domain_id=N,
/// obs_point_id=N[,sampling_port=P][,ingress|egress])`, as ovs-ofctl.
fn sample(cx: &LineCtx, arg: &str, at: usize) -> Result<crate::action::Sample, ParseError> {
    let mut s = crate::action::Sample {
        probability: 0,
        collector_set_id: 0,
        obs_domain_id: 0,
        obs_point_id: 0,
        sampling_port: None,
        direction: 0,
    };
    for kv in arg.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "probability" => {
                s.probability = parse_int(cx, v, at, 16, "probability")? as u16;
                if s.probability == 0 {
                    return Err(cx.err(at, format!("invalid probability value \"{v}\"")));
                }
            }
            "collector_set_id" => {
                s.collector_set_id = parse_int(cx, v, at, 32, "collector_set_id")? as u32
            }
            "obs_domain_id" => s.obs_domain_id = parse_int(cx, v, at, 32, "obs_domain_id")? as u32,
            "obs_point_id" => s.obs_point_id = parse_int(cx, v, at, 32, "obs_point_id")? as u32,
            "sampling_port" => {
                s.sampling_port = Some(parse_int(cx, v, at, 16, "sampling_port")? as u32)
            }
            "ingress" if v.is_empty() => s.direction = 1,
            "egress" if v.is_empty() => s.direction = 2,
            _ => return Err(cx.err(at, format!("invalid key \"{k}\" in \"sample\" argument"))),
        }
    }
    if s.probability == 0 {
        return Err(cx.err(at, "non-zero \"probability\" must be specified on sample"));
    }
    Ok(s)
}

/// `conjunction(ID,K/N)`, checked as `ovs-ofctl` checks it.
fn conjunction(cx: &LineCtx, arg: &str, at: usize) -> Result<Action, ParseError> {
    let bad = || {
        cx.err(
            at,
            format!("conjunction({arg}): expected conjunction(ID,K/N), e.g. conjunction(1,2/3)"),
        )
    };
    let (id, kn) = arg.split_once(',').ok_or_else(bad)?;
    let (k, n) = kn.split_once('/').ok_or_else(bad)?;
    let id = parse_int(cx, id.trim(), at, 32, "conjunction id")? as u32;
    let k = parse_int(cx, k.trim(), at, 8, "conjunction clause")?;
    let n = parse_int(cx, n.trim(), at, 8, "conjunction's number of clauses")?;
    if !(2..=64).contains(&n) {
        return Err(cx.err(
            at,
            "conjunction must have at least 2 clauses (and at most 64)",
        ));
    }
    if k == 0 || k > n {
        return Err(cx.err(
            at,
            "clause index must be positive and less than or equal to number of clauses",
        ));
    }
    Ok(Action::Conjunction {
        id,
        clause: k as u8,
        n_clauses: n as u8,
    })
}

/// A `load` of the bits `mask` of `sf`'s field (a `set_field` with a
/// mask is one too), checked as OVS checks it when the rule is added.
fn load_action(
    cx: &LineCtx,
    sf: Subfield,
    value: u128,
    mask: u128,
    cur: &Match,
    at: usize,
) -> Result<Action, ParseError> {
    check_loadable(cx, sf.field, cur, at, "load")?;
    Ok(Action::Load {
        field: sf.field,
        value,
        mask,
    })
}

/// Whether `load` or `move` may write `field` under the rule `m`.
fn check_loadable(
    cx: &LineCtx,
    field: &'static Field,
    m: &Match,
    at: usize,
    action: &str,
) -> Result<(), ParseError> {
    if matches!(field.name, "vlan_tci" | "vlan_vid" | "vlan_pcp") {
        return Err(cx.err(
            at,
            format!("{action} into {} is not supported: use mod_vlan_vid, mod_vlan_pcp, push_vlan or strip_vlan", field.name),
        ));
    }
    if !(field.writable || field.is_pipeline()) {
        return Err(cx.err(at, format!("{action}: {} cannot be written", field.name)));
    }
    check_action_prereq(cx, field, m, at, action)
}

fn check_action_prereq(
    cx: &LineCtx,
    field: &Field,
    m: &Match,
    at: usize,
    action: &str,
) -> Result<(), ParseError> {
    if field.write_prereq().holds(&m.value, &m.mask) {
        Ok(())
    } else {
        Err(cx.err(
            at,
            format!(
                "{action} on {} requires the rule to match {}",
                field.name,
                field.write_prereq().describe()
            ),
        ))
    }
}

/// Splits `name:arg` or `name(arg)`; returns the argument's offset.
fn split_action(t: &str, at: usize) -> (&str, Option<&str>, usize) {
    if let Some(i) = t.find(['(', ':']) {
        let name = &t[..i];
        if t.as_bytes()[i] == b'(' {
            let inner = t[i + 1..].strip_suffix(')').unwrap_or(&t[i + 1..]);
            return (name, Some(inner), at + i + 1);
        }
        return (name, Some(&t[i + 1..]), at + i + 1);
    }
    (t, None, at)
}

fn parse_resubmit(
    cx: &LineCtx,
    t: &str,
    arg: Option<&str>,
    at: usize,
) -> Result<Action, ParseError> {
    let Some(arg) = arg else {
        return Err(cx.err(at, "resubmit needs a port or table: resubmit:PORT, resubmit(,TABLE) or resubmit(PORT,TABLE)"));
    };
    let (p, tbl) = if t.contains('(') {
        match arg.split_once(',') {
            Some((p, tbl)) => (p.trim(), tbl.trim()),
            None => (arg.trim(), ""),
        }
    } else {
        (arg.trim(), "")
    };
    let in_port = if p.is_empty() || p.eq_ignore_ascii_case("in_port") {
        None
    } else if let Some(port) = crate::fields::reserved_port(p) {
        // A reserved port by name, as OVS takes it (`resubmit(CONTROLLER,38)`).
        Some(port)
    } else {
        Some(parse_int(cx, p, at, 32, "resubmit port")? as u32)
    };
    let table = if tbl.is_empty() {
        None
    } else {
        Some(parse_table(cx, tbl, at + p.len() + 1)?)
    };
    if in_port.is_none() && table.is_none() && !p.eq_ignore_ascii_case("in_port") {
        return Err(cx.err(at, "resubmit needs a port or a table"));
    }
    Ok(Action::Resubmit { in_port, table })
}
