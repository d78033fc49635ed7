//! OpenFlow over TLS (`ssl:` and `pssl:`), as Open vSwitch offers it:
//! the switch's key and certificate (`--private-key`, `--certificate`)
//! and the CA that signs its peers (`--ca-cert`). Both ends present a
//! certificate and both are verified against the CA; as OVS's
//! `stream-ssl`, the peer's host name or address is not checked against
//! its certificate (controllers are named by address, and OVS's PKI puts
//! no address in certificates), only its chain to the CA.
//!
//! A connection is relayed: a thread of its own runs the TLS session
//! between the TCP socket and one end of a unix socket pair, and the
//! OpenFlow session runs on the other end exactly as on `tcp:`/`unix:`.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, ClientConnection, Connection, DigitallySignedStruct, Error,
    RootCertStore, ServerConfig, ServerConnection, SignatureScheme,
};

/// The files `ssl:` and `pssl:` need (OVS's option names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// `--private-key`: the switch's private key (PEM).
    pub private_key: Option<PathBuf>,
    /// `--certificate`: the switch's certificate (PEM; a chain may follow).
    pub certificate: Option<PathBuf>,
    /// `--ca-cert`: the CA certificate(s) peers must chain to (PEM).
    pub ca_cert: Option<PathBuf>,
}

/// Both TLS configurations, made once at start.
pub struct Tls {
    /// For `pssl:` listeners: a client certificate is required.
    pub server: Arc<ServerConfig>,
    /// For `ssl:` controllers.
    pub client: Arc<ClientConfig>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(p: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(p)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{what} {}: {e}", p.display()))?;
    if certs.is_empty() {
        return Err(format!("{what} {}: no PEM certificate in it", p.display()));
    }
    Ok(certs)
}

impl TlsFiles {
    /// Reads the files and makes both configurations; each missing or
    /// unreadable file is an error that names its option.
    pub fn load(&self) -> Result<Tls, String> {
        let need = |p: &Option<PathBuf>, opt: &str| {
            p.clone().ok_or_else(|| {
                format!(
                    "ssl:/pssl: need --private-key, --certificate and --ca-cert ({opt} is missing)"
                )
            })
        };
        let (key, cert, ca) = (
            need(&self.private_key, "--private-key")?,
            need(&self.certificate, "--certificate")?,
            need(&self.ca_cert, "--ca-cert")?,
        );
        let chain = read_certs(&cert, "--certificate")?;
        let key = PrivateKeyDer::from_pem_file(&key)
            .map_err(|e| format!("--private-key {}: {e}", key.display()))?;
        let mut roots = RootCertStore::empty();
        for c in read_certs(&ca, "--ca-cert")? {
            roots
                .add(c)
                .map_err(|e| format!("--ca-cert {}: {e}", ca.display()))?;
        }
        let roots = Arc::new(roots);
        let provider = provider();
        let bad = |e: Error| format!("TLS set-up: {e}");
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|e| format!("--ca-cert {}: {e}", ca.display()))?;
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(bad)?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| format!("--private-key/--certificate: {e}"))?;
        let chain_only = ChainOnly(
            WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
                .build()
                .map_err(|e| format!("--ca-cert {}: {e}", ca.display()))?,
        );
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(bad)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(chain_only))
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("--private-key/--certificate: {e}"))?;
        Ok(Tls {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }
}

/// Verifies a controller's certificate chain to the CA, and not its name
/// (as OVS's `stream-ssl`): every other failure stands.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A server session for an accepted connection.
pub fn accept(tls: &Tls, tcp: TcpStream, peer: &str) -> Result<UnixStream, String> {
    let conn = ServerConnection::new(Arc::clone(&tls.server)).map_err(|e| e.to_string())?;
    relay(tcp, conn.into(), peer.to_string())
}

/// A client session to a controller at `tcp`'s peer.
pub fn connect(tls: &Tls, tcp: TcpStream, peer: &str) -> Result<UnixStream, String> {
    let ip = tcp.peer_addr().map_err(|e| e.to_string())?.ip();
    let conn = ClientConnection::new(Arc::clone(&tls.client), ServerName::IpAddress(ip.into()))
        .map_err(|e| e.to_string())?;
    relay(tcp, conn.into(), peer.to_string())
}

/// How long a write to either side may block before the connection is
/// given up (as the OpenFlow session's own write timeout).
const STALL: Duration = Duration::from_secs(10);

/// Runs the TLS session on a thread of its own between `tcp` and one end
/// of a new unix socket pair; returns the other end, which carries the
/// plain OpenFlow bytes. The thread ends when either side closes or the
/// TLS session fails (a peer whose certificate does not verify: logged).
fn relay(tcp: TcpStream, mut conn: Connection, peer: String) -> Result<UnixStream, String> {
    let (mine, theirs) = UnixStream::pair().map_err(|e| e.to_string())?;
    tcp.set_write_timeout(Some(STALL))
        .map_err(|e| e.to_string())?;
    mine.set_write_timeout(Some(STALL))
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    std::thread::Builder::new()
        .name("of-tls".into())
        .stack_size(256 << 10)
        .spawn(move || {
            if let Err(e) = pump(&mut conn, tcp, mine) {
                crate::loglimit::log_connection(&format!(
                    "OpenFlow TLS connection {peer} closed: {e}"
                ));
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(theirs)
}

/// Moves bytes both ways until one side ends.
fn pump(conn: &mut Connection, mut tcp: TcpStream, mut plain: UnixStream) -> Result<(), String> {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        while conn.wants_write() {
            conn.write_tls(&mut tcp).map_err(|e| format!("send: {e}"))?;
        }
        let want_plain = !conn.is_handshaking();
        let ready = match sluice_port::sys::poll(
            &[
                (tcp.as_raw_fd(), libc::POLLIN),
                (plain.as_raw_fd(), if want_plain { libc::POLLIN } else { 0 }),
            ],
            1000,
        ) {
            Ok(r) => r,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("poll: {e}")),
        };
        if ready[0] != 0 {
            match conn.read_tls(&mut tcp) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("receive: {e}")),
            }
            let state = match conn.process_new_packets() {
                Ok(s) => s,
                Err(e) => {
                    // Tell the peer why (an alert), then give up.
                    let _ = conn.write_tls(&mut tcp);
                    return Err(format!("refused: {e}"));
                }
            };
            if state.plaintext_bytes_to_read() > 0 {
                let mut left = state.plaintext_bytes_to_read();
                while left > 0 {
                    let n = conn
                        .reader()
                        .read(&mut buf[..left.min(16 << 10)])
                        .map_err(|e| e.to_string())?;
                    if n == 0 {
                        break;
                    }
                    plain.write_all(&buf[..n]).map_err(|e| e.to_string())?;
                    left -= n;
                }
            }
            if state.peer_has_closed() {
                return Ok(());
            }
        }
        if want_plain && ready[1] != 0 {
            match plain.read(&mut buf) {
                Ok(0) => {
                    conn.send_close_notify();
                    let _ = conn.write_tls(&mut tcp);
                    return Ok(());
                }
                Ok(n) => conn
                    .writer()
                    .write_all(&buf[..n])
                    .map_err(|e| e.to_string())?,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}
