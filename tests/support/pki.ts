/**
 * A throwaway PKI for proxy tests, made with the openssl command line: a client CA, a server
 * certificate for localhost, client certificates, and a rogue CA the proxy does not trust.
 *
 * @example
 * ```ts
 * declare const dir: string;
 * const pki = await makePki(dir, ["CN=alice,O=Example,C=DE"]);
 * pki.clients[0].cert; // path of alice's certificate
 * ```
 */

/** Paths of the generated files. `subject` is the RFC 4514 form nginx passes on. */
export interface Pki {
  caCert: string;
  /** The client CA's CRL (PEM); empty at first, rewritten by {@link revokeClient}. */
  crl: string;
  /** openssl ca configuration of the client CA (its database and CRL settings). */
  caConfig: string;
  serverCert: string;
  serverKey: string;
  clients: Array<{ subject: string; cert: string; key: string }>;
  rogue: { subject: string; cert: string; key: string };
}

async function openssl(args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, stdout: "null", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`openssl ${args[0]} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** "CN=alice,O=Example,C=DE" → "/C=DE/O=Example/CN=alice" (openssl -subj takes the slash form). */
export function rfc4514ToSlash(subject: string): string {
  return "/" + subject.split(",").reverse().join("/");
}

async function makeCa(dir: string, name: string): Promise<{ cert: string; key: string }> {
  const key = `${dir}/${name}.key`, cert = `${dir}/${name}.pem`;
  await openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key]);
  await openssl([
    "req",
    "-new",
    "-x509",
    "-key",
    key,
    "-out",
    cert,
    "-days",
    "2",
    "-subj",
    `/CN=${name}`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  return { cert, key };
}

async function issue(
  dir: string,
  name: string,
  subj: string,
  ca: { cert: string; key: string },
  ext: string,
): Promise<{ cert: string; key: string }> {
  const key = `${dir}/${name}.key`, csr = `${dir}/${name}.csr`, cert = `${dir}/${name}.pem`;
  const extFile = `${dir}/${name}.ext`;
  await Deno.writeTextFile(extFile, ext);
  await openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key]);
  await openssl(["req", "-new", "-key", key, "-out", csr, "-subj", subj]);
  await openssl([
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    ca.cert,
    "-CAkey",
    ca.key,
    "-CAcreateserial",
    "-out",
    cert,
    "-days",
    "2",
    "-extfile",
    extFile,
  ]);
  return { cert, key };
}

/**
 * Makes the PKI in `dir` with one client certificate per RFC 4514 subject.
 *
 * @example
 * ```ts
 * await makePki(await Deno.makeTempDir(), ["CN=bob,O=Example,C=DE"]);
 * ```
 */
export async function makePki(dir: string, subjects: string[]): Promise<Pki> {
  const ca = await makeCa(dir, "client-ca");
  const rogueCa = await makeCa(dir, "rogue-ca");
  const server = await issue(
    dir,
    "server",
    "/CN=localhost",
    ca,
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
  );
  const clientExt = "extendedKeyUsage=clientAuth\n";
  const clients = [];
  for (const [i, subject] of subjects.entries()) {
    clients.push({
      subject,
      ...await issue(dir, `client${i}`, rfc4514ToSlash(subject), ca, clientExt),
    });
  }
  const caConfig = await writeCaConfig(dir, ca);
  const crl = `${dir}/client-ca.crl`;
  await openssl(["ca", "-config", caConfig, "-gencrl", "-out", crl]);
  const rogueSubject = subjects[0] ?? "CN=rogue";
  const rogue = await issue(dir, "rogue", rfc4514ToSlash(rogueSubject), rogueCa, clientExt);
  return {
    caCert: ca.cert,
    crl,
    caConfig,
    serverCert: server.cert,
    serverKey: server.key,
    clients,
    rogue: { subject: rogueSubject, ...rogue },
  };
}

async function writeCaConfig(dir: string, ca: { cert: string; key: string }): Promise<string> {
  const db = `${dir}/ca-db`;
  await Deno.mkdir(db, { recursive: true });
  await Deno.writeTextFile(`${db}/index.txt`, "");
  await Deno.writeTextFile(`${db}/crlnumber`, "01\n");
  const config = `${dir}/ca.cnf`;
  await Deno.writeTextFile(
    config,
    `[ca]\ndefault_ca = client_ca\n[client_ca]\ndatabase = ${db}/index.txt\n` +
      `crlnumber = ${db}/crlnumber\ncertificate = ${ca.cert}\nprivate_key = ${ca.key}\n` +
      `default_md = sha256\ndefault_crl_days = 2\n`,
  );
  return config;
}

/**
 * Revokes a client certificate in the CA's database and rewrites the CRL (`pki.crl`); the proxy
 * refuses the certificate once it reloads the CRL.
 */
export async function revokeClient(pki: Pki, cert: string): Promise<void> {
  await openssl(["ca", "-config", pki.caConfig, "-revoke", cert]);
  await openssl(["ca", "-config", pki.caConfig, "-gencrl", "-out", pki.crl]);
}
