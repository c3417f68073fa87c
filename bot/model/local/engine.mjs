// The local model's engine: node-llama-cpp, run by bot/model/local/server.py inside a sandbox (no network, the
// GGUF and this engine read-only, an empty environment). It speaks JSON lines: one request at a time on stdin,
// events on stdout. One context holds SEQUENCES sequences (each CONTEXT_SIZE tokens): requests run at once, one per
// sequence, and node-llama-cpp decodes the running sequences together in one batch. A request takes the free
// sequence whose evaluated tokens share the longest prefix with its prompt and evaluates only the tokens after it
// (a trial's next turn, or another trial of the same arm: system prompt, tools and task); with every sequence
// busy it waits for one.
//   argv: ENGINE_DIR GGUF_PATH CONTEXT_SIZE THREADS [SEQUENCES]
//   out: {"type":"ready","load_s":..,"context_size":..}
//   in:  {"op":"complete","id":..,"prompt":[[text, special]..],"max_tokens":n,"temperature":t,"top_p":p,"top_k":k,"seed":s}
//   out: {"type":"prompt","id":..,"prompt_tokens":..,"reused_tokens":..,"sequence":i}, {"type":"delta","id":..,"text":".."}* then {"type":"done","id":..,"stop_reason":"end"|"max_tokens"|"cancelled",
//        "prompt_tokens","reused_tokens","evaluated_tokens","output_tokens","prompt_s","gen_s"} or {"type":"error",..}
//        (benchmarks add "fresh": true to evaluate from an empty context, "only_last": n to keep the last n tokens;
//        "json_schema": {...} constrains the answer to JSON of that schema, node-llama-cpp's GBNF subset)
//   in:  {"op":"cancel","id":..} ends that completion (it reports "cancelled"); without an id, every running one.
import {createRequire} from "node:module";
import readline from "node:readline";

const [engineDir, ggufPath, contextSizeArg, threadsArg, sequencesArg] = process.argv.slice(2);
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
send({type: "ready", load_s: (performance.now() - started) / 1000, context_size: context.contextSize,
      sequences: sequenceCount});

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

function takeSlot(tokens) {
    let best = null, bestShared = -1;
    for (const slot of slots) {
        if (slot.busy) continue;
        const shared = sharedPrefix(slot.sequence.contextTokens, tokens);
        if (shared > bestShared) { best = slot; bestShared = shared; }
    }
    if (best !== null) best.busy = true;
    return best;
}

async function complete(request, slot, tokens) {
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
    await sequence.adaptStateToTokens(tokens, false);  // erase what follows the common prefix
    let reused = Math.min(sequence.nextTokenIndex, tokens.length);
    if (reused === tokens.length && reused > 0) {  // all evaluated: evaluate the last token again to sample from it
        await sequence.eraseContextTokenRanges([{start: reused - 1, end: sequence.nextTokenIndex}]);
        reused -= 1;
    }
    const fresh = tokens.slice(reused);
    send({type: "prompt", id: request.id, prompt_tokens: tokens.length, reused_tokens: reused, sequence: slot.index});
    const options = {temperature: request.temperature, topP: request.top_p, topK: request.top_k};
    if (request.seed != null) options.seed = request.seed;
    if (grammar !== null) options.grammarEvaluationState = new LlamaGrammarEvaluationState({model, grammar});
    const out = [];
    let sent = "", stop = "end", first = null;
    const t0 = performance.now();
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
    }
    const end = performance.now();
    const text = model.detokenize(out);
    if (text.length > sent.length) send({type: "delta", id: request.id, text: text.slice(sent.length)});
    send({type: "done", id: request.id, stop_reason: stop, prompt_tokens: tokens.length, reused_tokens: reused,
          evaluated_tokens: fresh.length, output_tokens: out.length,
          prompt_s: ((first ?? end) - t0) / 1000, gen_s: (end - (first ?? end)) / 1000});
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
    const slot = takeSlot(tokens);
    if (slot === null) { waiting.push(request); return; }
    running.add(request.id);
    try {
        await complete(request, slot, tokens);
    } catch (error) {
        send({type: "error", id: request.id, kind: "engine", message: String(error?.message ?? error)});
    } finally {
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
lines.on("close", async () => { await context.dispose(); await model.dispose(); await llama.dispose(); process.exit(0); });
