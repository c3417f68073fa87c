// The local model's engine: node-llama-cpp, run by bot/model/local/server.py inside a sandbox (no network, the
// GGUF and this engine read-only, an empty environment). It speaks JSON lines: one request at a time on stdin,
// events on stdout. One context holds SEQUENCES sequences (each CONTEXT_SIZE tokens): requests run at once, one per
// sequence, and node-llama-cpp decodes the running sequences together in one batch. A request takes the free
// sequence whose evaluated tokens share the longest prefix with its prompt and evaluates only the tokens after it
// (a trial's next turn, or another trial of the same arm: system prompt, tools and task); with every sequence
// busy it waits for one.
// Snapshots share an evaluated prefix across sequences: a request that evaluates at least SNAPSHOT_MIN tokens anew
// evaluates its prompt but the last token, saves that sequence's state to a file in SNAPSHOT_DIR (a tmpfs private
// to the engine's jail; at most SNAPSHOTS files, the least recently used dropped), then samples. A request whose
// free sequence shares fewer tokens with it than a snapshot does (by SNAPSHOT_MIN or more) loads that snapshot
// into the sequence first and evaluates only what follows it; one whose long prefix another request is evaluating
// right now waits for that request's snapshot instead of evaluating the prefix beside it (on CPU, prompt
// evaluation is compute-bound: two sequences evaluating one prefix take twice the time of one).
//   argv: ENGINE_DIR GGUF_PATH CONTEXT_SIZE THREADS [SEQUENCES [SNAPSHOT_DIR|- [SNAPSHOTS]]]
//   out: {"type":"ready","load_s":..,"context_size":..}
//   in:  {"op":"complete","id":..,"prompt":[[text, special]..],"max_tokens":n,"temperature":t,"top_p":p,"top_k":k,"seed":s}
//   out: {"type":"prompt","id":..,"prompt_tokens":..,"reused_tokens":..,"snapshot_tokens":..,"sequence":i},
//        {"type":"delta","id":..,"text":".."}* then {"type":"done","id":..,"stop_reason":"end"|"max_tokens"|"cancelled",
//        "prompt_tokens","reused_tokens","snapshot_tokens","evaluated_tokens","output_tokens","prompt_s","gen_s",
//        "held_s","load_s","save_s"} or {"type":"error",..}  (reused_tokens counts snapshot_tokens, the reused
//        tokens a snapshot brought; held_s: waiting for another request's snapshot; load_s/save_s: the snapshots')
//        (benchmarks add "fresh": true to evaluate from an empty context, "only_last": n to keep the last n tokens;
//        "json_schema": {...} constrains the answer to JSON of that schema, node-llama-cpp's GBNF subset)
//   in:  {"op":"cancel","id":..} ends that completion (it reports "cancelled"); without an id, every running one.
import fs from "node:fs";
import {createRequire} from "node:module";
import path from "node:path";
import readline from "node:readline";

const [engineDir, ggufPath, contextSizeArg, threadsArg, sequencesArg, snapshotDirArg, snapshotsArg] =
    process.argv.slice(2);
const require = createRequire(engineDir + "/package.json");
const {getLlama, LlamaLogLevel, LlamaGrammarEvaluationState} = await import(require.resolve("node-llama-cpp"));

const send = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const started = performance.now();
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false});
const model = await llama.loadModel({modelPath: ggufPath});
const sequenceCount = Math.max(1, Number(sequencesArg ?? 1));
const context = await model.createContext({contextSize: Number(contextSizeArg), threads: Number(threadsArg),
                                           sequences: sequenceCount});
const slots = Array.from({length: sequenceCount}, (_, index) => ({index, sequence: context.getSequence(), busy: false}));
const snapshotLimit = snapshotDirArg && snapshotDirArg !== "-" ? Math.max(0, Number(snapshotsArg ?? 4)) : 0;
const snapshotDir = snapshotLimit > 0 ? fs.mkdtempSync(path.join(snapshotDirArg, "snapshots-")) : null;
send({type: "ready", load_s: (performance.now() - started) / 1000, context_size: context.contextSize,
      sequences: sequenceCount, snapshots: snapshotLimit});

const cancelled = new Set();  // ids of running requests asked to stop
const running = new Set();
const grammars = new Map();  // a schema's JSON -> its grammar: a schema is compiled once per engine

async function grammarFor(schema) {
    const key = JSON.stringify(schema);
    if (!grammars.has(key)) {
        if (grammars.size >= 16) grammars.delete(grammars.keys().next().value);
        grammars.set(key, await llama.createGrammarForJsonSchema(schema));
    }
    return grammars.get(key);
}
const waiting = [];  // requests for which no sequence was free

function sharedPrefix(a, b) {
    let n = 0;
    const end = Math.min(a.length, b.length);
    while (n < end && a[n] === b[n]) n += 1;
    return n;
}

function freeSlot(tokens) {
    let best = null, bestShared = -1;
    for (const slot of slots) {
        if (slot.busy) continue;
        const shared = sharedPrefix(slot.sequence.contextTokens, tokens);
        if (shared > bestShared) { best = slot; bestShared = shared; }
    }
    return {slot: best, shared: Math.max(0, bestShared)};
}

// Snapshots: {tokens, file, used, readers, dropped}, each a sequence's state right after a prompt (but its last
// token) was evaluated. Pending: {tokens, done, resolve}, prompts being evaluated now that will leave a snapshot.
const SNAPSHOT_MIN = 256;
const snapshots = [];
const pending = [];
let snapshotClock = 0;

// Saving and loading take node-llama-cpp's context lock, which its decode loop holds while any sequence has a
// decode queued: with answers running, a snapshot would wait for them all to end. So running answers pause
// between tokens, and prompts being evaluated for a snapshot between pieces of SNAPSHOT_MIN tokens (`gate`), while
// a snapshot is saved or loaded: one step's pause.
let gate = null, openGate = null, gateHolders = 0;

async function gated(operation) {
    if (gateHolders++ === 0) gate = new Promise((resolve) => { openGate = resolve; });
    try {
        return await operation();
    } finally {
        if (--gateHolders === 0) { gate = null; openGate(); }
    }
}

function best(entries, tokens) {
    let found = null, shared = 0;
    for (const entry of entries) {
        const n = sharedPrefix(entry.tokens, tokens);
        if (n > shared) { found = entry; shared = n; }
    }
    return {entry: found, shared};
}

function dropSnapshot(snapshot) {  // its file goes once no request that chose to load it is left
    snapshots.splice(snapshots.indexOf(snapshot), 1);
    snapshot.dropped = true;
    release(snapshot, 0);
}

function release(snapshot, readers = 1) {
    snapshot.readers -= readers;
    if (snapshot.dropped && snapshot.readers === 0) fs.rm(snapshot.file, {force: true}, () => {});
}

async function saveSnapshot(sequence) {
    const tokens = sequence.contextTokens.slice();
    const covering = snapshots.find((s) => sharedPrefix(s.tokens, tokens) === tokens.length);
    if (covering) { covering.used = ++snapshotClock; return 0; }  // one already holds these tokens (and more)
    const t0 = performance.now();
    const file = path.join(snapshotDir, `${++snapshotClock}.state`);
    await gated(() => sequence.saveStateToFile(file));
    for (const covered of snapshots.filter((s) => sharedPrefix(s.tokens, tokens) === s.tokens.length))
        dropSnapshot(covered);  // this one holds its tokens and more
    snapshots.push({tokens, file, used: snapshotClock, readers: 0, dropped: false});
    while (snapshots.length > snapshotLimit)
        dropSnapshot(snapshots.reduce((a, b) => (a.used <= b.used ? a : b)));
    return (performance.now() - t0) / 1000;
}

async function loadSnapshot(sequence, snapshot) {  // {tokens: the tokens it brought, s: seconds it took}
    const t0 = performance.now();
    try {
        await gated(() => sequence.loadStateFromFile(snapshot.file, {acceptRisk: true}));
        return {tokens: sequence.nextTokenIndex, s: (performance.now() - t0) / 1000};
    } catch {
        await sequence.clearHistory();  // it evaluates the prompt itself, as without a snapshot
        return {tokens: 0, s: (performance.now() - t0) / 1000};
    }
}

// What taking `slot` for `tokens` does about snapshots (decided at once, so a request arriving next sees it):
// the snapshot to load first, if one shares SNAPSHOT_MIN tokens more than the sequence holds; and the pending
// entry this request fills, if it will evaluate SNAPSHOT_MIN tokens or more anew.
function snapshotPlan(slot, shared, tokens, request) {
    if (snapshotDir === null || request.fresh || request.only_last) return {load: null, save: null};
    const found = best(snapshots, tokens);
    const load = found.shared >= shared + SNAPSHOT_MIN ? found.entry : null;
    if (load) { load.readers += 1; load.used = ++snapshotClock; }  // its file stays until this request is done
    const start = Math.min(load ? found.shared : shared, tokens.length - 1);
    let save = null;
    if (tokens.length - 1 - start >= SNAPSHOT_MIN) {
        save = {tokens: tokens.slice(0, -1)};
        save.done = new Promise((resolve) => { save.resolve = resolve; });
        pending.push(save);
    }
    return {load, save};
}

// The request evaluating a prompt now that shares SNAPSHOT_MIN tokens more with `tokens` than any free sequence or
// snapshot does (its pending entry, null if none): its snapshot will hold them, so this request waits for it.
function aheadOf(tokens, request) {
    if (snapshotDir === null || request.fresh || request.only_last || cancelled.has(request.id)) return null;
    const ahead = best(pending, tokens);
    const have = Math.max(freeSlot(tokens).shared, best(snapshots, tokens).shared);
    return ahead.entry !== null && ahead.shared >= have + SNAPSHOT_MIN ? ahead.entry : null;
}

async function complete(request, slot, tokens, plan, held_s) {
    // Segments: [text, special]. Only the chat template's markers are special tokens; request text never is.
    let grammar = null;
    if (request.json_schema != null) {
        try {
            grammar = await grammarFor(request.json_schema);
        } catch (error) {
            send({type: "error", id: request.id, kind: "schema", message: String(error?.message ?? error)});
            return;
        }
    }
    const sequence = slot.sequence;
    if (request.fresh) await sequence.clearHistory();  // a benchmark's "without reuse" side
    if (request.only_last) tokens.splice(0, tokens.length - request.only_last);  // ...and "these tokens alone"
    const {tokens: loaded, s: load_s} = plan.load ? await loadSnapshot(sequence, plan.load) : {tokens: 0, s: 0};
    await sequence.adaptStateToTokens(tokens, false);  // erase what follows the common prefix
    let reused = Math.min(sequence.nextTokenIndex, tokens.length);
    if (reused === tokens.length && reused > 0) {  // all evaluated: evaluate the last token again to sample from it
        await sequence.eraseContextTokenRanges([{start: reused - 1, end: sequence.nextTokenIndex}]);
        reused -= 1;
    }
    const snapshot_tokens = Math.min(loaded, reused);
    let fresh = tokens.slice(reused);
    send({type: "prompt", id: request.id, prompt_tokens: tokens.length, reused_tokens: reused, snapshot_tokens,
          sequence: slot.index});
    const options = {temperature: request.temperature, topP: request.top_p, topK: request.top_k};
    if (request.seed != null) options.seed = request.seed;
    if (grammar !== null) options.grammarEvaluationState = new LlamaGrammarEvaluationState({model, grammar});
    const out = [];
    let sent = "", stop = "end", first = null, save_s = 0;
    const t0 = performance.now();
    if (plan.save && fresh.length > 1) {  // the prompt but its last token, a snapshot of that, then sampling
        const prompt = fresh.slice(0, -1);
        for (let at = 0; at < prompt.length; at += SNAPSHOT_MIN) {  // in pieces: a snapshot waits for one at most
            await sequence.evaluateWithoutGeneratingNewTokens(prompt.slice(at, at + SNAPSHOT_MIN));
            if (gate !== null) await gate;
        }
        save_s = await saveSnapshot(sequence);
        fresh = fresh.slice(-1);
    }
    if (plan.save) settle(plan.save);
    for await (const token of sequence.evaluate(fresh, options)) {
        if (first === null) first = performance.now();
        if (model.isEogToken(token)) break;
        out.push(token);
        const text = model.detokenize(out);
        if (!text.endsWith("\uFFFD") && text.length > sent.length) {
            send({type: "delta", id: request.id, text: text.slice(sent.length)});
            sent = text;
        }
        if (grammar !== null && text.trimEnd().endsWith("}") && completeJson(text)) break;  // not trailing blanks
        if (cancelled.has(request.id)) { stop = "cancelled"; break; }
        if (out.length >= request.max_tokens) { stop = "max_tokens"; break; }
        if (gate !== null) await gate;  // a snapshot is being saved or loaded
    }
    const end = performance.now();
    const text = model.detokenize(out);
    if (text.length > sent.length) send({type: "delta", id: request.id, text: text.slice(sent.length)});
    send({type: "done", id: request.id, stop_reason: stop, prompt_tokens: tokens.length, reused_tokens: reused,
          snapshot_tokens, evaluated_tokens: tokens.length - reused, output_tokens: out.length,
          prompt_s: ((first ?? end) - t0) / 1000, gen_s: (end - (first ?? end)) / 1000, held_s, load_s, save_s});
}

function settle(entry) {  // a pending snapshot is saved, or will not be: whoever waits for it goes on
    const at = pending.indexOf(entry);
    if (at >= 0) pending.splice(at, 1);
    entry.resolve();
}

function completeJson(text) {
    try { JSON.parse(text); return true; } catch { return false; }
}

async function start(request) {
    let tokens;
    try {
        tokens = request.prompt.flatMap(([text, special]) => model.tokenize(text, special === true));
    } catch (error) {
        send({type: "error", id: request.id, kind: "engine", message: String(error?.message ?? error)});
        return;
    }
    if (tokens.length + request.max_tokens > context.contextSize) {
        send({type: "error", id: request.id, kind: "too_long", message:
              `the prompt is ${tokens.length} tokens and max_tokens ${request.max_tokens}; ` +
              `the context holds ${context.contextSize}`});
        return;
    }
    running.add(request.id);
    const t0 = performance.now();
    // No await between here and snapshotPlan unless held: a request read right after this one sees its plan.
    for (let ahead = aheadOf(tokens, request); ahead !== null; ahead = aheadOf(tokens, request)) await ahead.done;
    const held_s = (performance.now() - t0) / 1000;
    const {slot, shared} = freeSlot(tokens);
    if (slot === null) { running.delete(request.id); waiting.push(request); return; }
    slot.busy = true;
    const plan = snapshotPlan(slot, shared, tokens, request);
    try {
        await complete(request, slot, tokens, plan, held_s);
    } catch (error) {
        send({type: "error", id: request.id, kind: "engine", message: String(error?.message ?? error)});
    } finally {
        if (plan.save) settle(plan.save);
        if (plan.load) release(plan.load);
        running.delete(request.id);
        cancelled.delete(request.id);
        slot.busy = false;
        if (waiting.length) start(waiting.shift());
    }
}

const lines = readline.createInterface({input: process.stdin});
lines.on("line", (line) => {
    let request;
    try { request = JSON.parse(line); } catch { send({type: "error", id: null, kind: "protocol",
                                                      message: "a line that is not JSON"}); return; }
    if (request.op === "cancel") {
        const ids = request.id == null ? [...running] : [request.id];
        for (const id of ids) {
            const at = waiting.findIndex((r) => r.id === id);
            if (at >= 0) {
                waiting.splice(at, 1);
                send({type: "done", id, stop_reason: "cancelled", prompt_tokens: 0, reused_tokens: 0, evaluated_tokens: 0,
                      output_tokens: 0, prompt_s: 0, gen_s: 0});
            } else if (running.has(id)) cancelled.add(id);
        }
        return;
    }
    if (request.op === "complete") { start(request); return; }
    send({type: "error", id: request.id ?? null, kind: "protocol", message: `unknown op ${request.op}`});
});
lines.on("close", async () => {
    await context.dispose(); await model.dispose(); await llama.dispose();
    if (snapshotDir !== null) fs.rmSync(snapshotDir, {recursive: true, force: true});
    process.exit(0);
});
