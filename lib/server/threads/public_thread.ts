/**
 * The module each public thread runs: its own isolate, event loop, acceptor, queue, deadlines and
 * PKCS#11 sessions, so anonymous traffic cannot starve the authenticated side. It opens the module
 * the main isolate already initialised and logged in (login state belongs to the process), finds
 * the OCSP key, and serves GET /certificates, POST /ocsp and (with --ca-dir) GET /crl/NAME until
 * told to close; the thread of socket slot 0 also keeps the CRLs fresh (lib/ca CrlKeeper). Only
 * ./public_threads.ts talks to it, in the messages of ./protocol.ts.
 */
import { Listener } from "../../http/mod.ts";
import { attachMetrics, countedListener, sampleGauges } from "../../metrics/observe.ts";
import { countRevocationLoad, crlMetrics, ocspMetrics } from "../../metrics/svcd.ts";
import { CrlFiles } from "../public/crl_files.ts";
import { CaFolder } from "../../ca/store.ts";
import { CrlKeeper } from "../../ca/crl_publish.ts";
import { advanceCrlNumber } from "../../ca/crl_number.ts";
import { bytesEqual } from "../../bytes/mod.ts";
import { IndexFileSource, parseCertificate, Responder } from "../../ocsp/mod.ts";
import { Token } from "../../token/mod.ts";
import { stopThread } from "./thread_group.ts";
import { publicHandler } from "../public/routes.ts";
import { setThreadNice, threadNice } from "./priority.ts";
import { checkResponderKey, loadPublicFiles } from "../public/files.ts";
import type { PublicThreadMessage, PublicThreadReport, PublicThreadSetup } from "./protocol.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
let listener: Listener | undefined;
let serving: Promise<void> | undefined;
let token: Token | undefined;
let keeper: CrlKeeper | undefined;

function report(message: PublicThreadReport): void {
  scope.postMessage(message);
}

scope.onmessage = async (e: MessageEvent<PublicThreadMessage>) => {
  const message = e.data;
  if (message.kind === "start") {
    try {
      await start(message.setup);
      report({ kind: "listening" });
    } catch (err) {
      await stop(0);
      report({ kind: "failed", message: (err as Error).message });
    }
  } else if (message.kind === "close") {
    await stop(message.graceMs);
    report({ kind: "closed" });
  }
};

async function start(setup: PublicThreadSetup): Promise<void> {
  // Only ever lower the priority: a unit already niced above --public-nice keeps its value
  // (raising the priority again would need CAP_SYS_NICE).
  if (setup.nice > threadNice()) setThreadNice(setup.nice);
  const files = loadPublicFiles(setup);
  token = Token.open({ ...setup.token, inlineSignLimitUs: Infinity });
  token.onDead((err) => report({ kind: "token_dead", message: err.message }));
  const key = await token.key(setup.ocspLabel);
  if (!key) {
    throw new Error(
      `--ocsp-label '${setup.ocspLabel}': no such key on the token; make it with 'svcd token keygen'`,
    );
  }
  checkResponderKey(files, key);
  const signingToken = token;
  // Counting starts before the first read of the database, so that load is counted too.
  attachMetrics(setup.metrics, setup.shared.slot);
  const source = new IndexFileSource(setup.revocationDb, {
    memory: setup.revocationMemory,
    onLoad: countRevocationLoad,
    onUnavailable: (why) => report({ kind: "log", message: `ocsp: answering tryLater: ${why}` }),
  });
  const responder = new Responder({
    source,
    issuer: files.issuer.der,
    signer: {
      keyType: key.keyType,
      sign: async (tbs) => (await signingToken.sign(key, tbs)).signature,
    },
    responderCertificate: files.responder?.der,
    validitySeconds: setup.validitySeconds,
    // A dead token was already told through onDead; the answer is internalError either way.
    onSignError: (err) =>
      report({ kind: "log", message: `ocsp: signing failed: ${(err as Error).message}` }),
    observer: ocspMetrics,
  });
  source.current(); // an unloadable database is said now (onUnavailable), not at the first query
  const crls = setup.crl ? await startCrls(setup, signingToken, source) : undefined;
  listener = Listener.open({
    path: setup.socket,
    shared: setup.shared,
    proxyUid: null,
    queueDepth: setup.queueDepth,
    maxBodyBytes: setup.maxBodyBytes,
    workers: setup.workers,
    ...countedListener("public", {
      handler: publicHandler({ certificates: files.certificatesPem, responder, crls }),
    }),
    log: (event) => report({ kind: "listener_event", event }),
  });
  serving = listener.serve();
  const open = listener;
  sampleGauges("public", () => open.stats());
}

/**
 * The CRLs of --ca-dir: every thread serves the CRL folder; the thread of slot 0 keeps it fresh
 * with the CA key (ca.json's label, checked against ca.pem). cRLNumbers come from the CA folder's
 * counter, or from the CRL folder's own when this user cannot write the CA folder's.
 */
async function startCrls(
  setup: PublicThreadSetup,
  signingToken: Token,
  source: IndexFileSource,
): Promise<CrlFiles> {
  const crl = setup.crl!;
  const folder = await CaFolder.open(crl.caDir);
  const urls = folder.config.urls ?? {};
  const files = new CrlFiles(crl.dir, urls.crlPartitions ?? 1);
  if (setup.shared.slot !== 0) return files;
  const ca = parseCertificate(folder.caDer);
  const key = await signingToken.key(folder.config.keyLabel);
  if (!key?.publicKeySpki || !bytesEqual(key.publicKeySpki, ca.spki)) {
    throw new Error(
      `--ca-dir ${crl.caDir}: the token has no key '${folder.config.keyLabel}' of the CA ` +
        "certificate ca.pem (ca.json names it); pass the --token that holds the CA key",
    );
  }
  const log = (message: string) => report({ kind: "log", message });
  let ownCounter = false;
  keeper = new CrlKeeper({
    source,
    issuer: { name: ca.subject, spki: ca.spki, crlUrl: urls.crl },
    partitions: urls.crlPartitions ?? 1,
    signer: {
      keyType: key.keyType,
      sign: async (tbs) => (await signingToken.sign(key, tbs)).signature,
    },
    validitySeconds: crl.validitySeconds,
    dir: crl.dir,
    takeNumber: async (atLeast) => {
      if (!ownCounter) {
        try {
          return await folder.takeCrlNumber(atLeast);
        } catch (err) {
          ownCounter = true;
          log(
            `crl: cannot advance ${CaFolder.paths(crl.caDir).crlNumber} ` +
              `(${(err as Error).message}); cRLNumbers are taken from ${crl.dir}/crlnumber, ` +
              "ordered with other nodes' by the clocks only",
          );
        }
      }
      return await advanceCrlNumber(`${crl.dir}/crlnumber`, `${crl.dir}/.crlnumber.lock`, atLeast);
    },
    log,
    onFailure: crlMetrics.failed,
    onSigned: crlMetrics.signed,
  });
  await keeper.start();
  return files;
}

async function stop(graceMs: number): Promise<void> {
  await keeper?.stop();
  keeper = undefined;
  await stopThread({ listener, serving, token }, graceMs);
  listener = undefined;
  token = undefined;
}
