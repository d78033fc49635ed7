# An os-ken app that installs one rule on every switch that connects, and
# logs each connection (the test counts them to see reconnects).
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3


class Marker(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        p = dp.ofproto_parser
        print("MARKER connected dpid=%016x" % dp.id, flush=True)
        match = p.OFPMatch(eth_type=0x0800, ipv4_dst=("10.1.0.0", "255.255.0.0"))
        inst = [p.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS,
                                        [p.OFPActionOutput(2)])]
        dp.send_msg(p.OFPFlowMod(datapath=dp, priority=42, match=match,
                                 instructions=inst))
        dp.send_msg(p.OFPBarrierRequest(dp))
