<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="en">
<context>
    <name>ConversationStore</name>
    <message>
        <source>%1: cannot be read</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1: not valid JSON (%2)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1: not a conversation file</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>EngineSettings</name>
    <message>
        <source>the .env file %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 &apos;%2&apos; (from %3) is not usable: %4</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>give a whole number from %1 to %2.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>give the share of the GPU&apos;s memory to use, above 0 and at most 1 (the recipe&apos;s 0.87).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>GLM-5.3-Flash&apos;s sparse MLA kernels read the packed fp8 cache (fp8_ds_mla); give fp8, or fp32 for the exact reference mode.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>give fp8 (the recipe&apos;s) or fp32.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>give auto, cpu or cuda.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>EnvSchema</name>
    <message>
        <source>NCCL cannot use the 10.0.0.x loopback aliases: its traffic is pinned to the CX7 interfaces and RDMA devices on the Fabric page, and wrong pins hang initialisation (ncclCommInitRank) instead of failing.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model folder</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The checkpoint folder: config.json, the *.safetensors shards and tokenizer.json. The production model is Mia-AiLab/GLM-5.3-Flash-EXL3-TR3-4bpw (120 shards, about 164 GiB).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Head address</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This machine: rank 0, the scheduler, the API and the NCCL master. </source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Worker address</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The second Spark (rank 1), reached over SSH. It must differ from the head address.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Worker SSH user</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The account on the worker, when it differs from yours here. Passwordless SSH from the head to the worker is required. Empty: the same user name.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Worker home</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Home directory (and Hugging Face cache location) on the worker, when it differs. An absolute path; empty: the same as here.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>API port</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Port of the OpenAI-compatible API on the head node (base URL http://HEAD:PORT/v1).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>API key</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Bearer key that API clients must send. Without one the API has no authentication: the recipe warns to always set it in production.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Head CX7 interface</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Network interface of the CX7 link on the head (see `ip -br link`). </source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Worker CX7 interface</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Network interface of the CX7 link on the worker. Keep the documented pins unless your cabling differs.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Head RDMA devices</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>RDMA (HCA) devices of the CX7 link on the head, comma-separated (see `ibdev2netdev`). Wrong devices hang NCCL initialisation.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Worker RDMA devices</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>RDMA devices of the CX7 link on the worker, comma-separated.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>KV cache type</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Storage of the target model&apos;s KV cache. The sparse MLA kernels take packed fp8_ds_mla only, so the recipe keeps fp8.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>MoE backend</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>How routed experts run. EXL3 weights need their own packed-expert path.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Draft attention</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Attention backend of the speculative draft model (used once speculative decoding is available). Left to the automatic choice, FLASH_ATTN.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>fp8 (packed fp8_ds_mla)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>bf16</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Forbidden: there is no sparse MLA kernel for a BF16 KV cache.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>nvfp4</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Forbidden: the NVFP4 KV kernels are for dense MHA, not sparse MLA.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>EXL3 packed experts</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>marlin</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Forbidden: this deployment uses EXL3 weights and their own packed-expert method; --moe-backend marlin is not allowed.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>automatic (FLASH_ATTN)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>TRITON_ATTN</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Forbidden: TRITON_ATTN makes attention inside the draft block causal; acceptance collapsed and speed fell from 61.7 to about 29 tok/s.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Remove the spaces around the value.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>A port is a number from 1 to 65535.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Ports below 1024 need administrator rights.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Not a valid user name (lower-case letters, digits, &apos;_&apos; and &apos;-&apos;).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Give an absolute path (starting with /).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Spaces in the path: make sure the worker&apos;s scripts quote it.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No API key: anyone who can reach the port can use the API.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The key cannot contain spaces.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>A short key is easy to guess; use 12 characters or more.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Unknown value &apos;%1&apos;.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No model folder yet: the Server page will ask for one.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Give an absolute path.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This folder does not exist.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This is a file, not a folder.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No config.json in this folder: it is not a checkpoint.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No tokenizer.json: the model can run, but not chat.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>An IPv4 address looks like 10.0.0.1 (four numbers from 0 to 255).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>A loopback address (127.x) cannot be reached from the other node.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Not a host address.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The head and worker addresses must differ.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Needed for the two-node setup only.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&apos;%1&apos; is an address alias; NCCL needs the interface itself (without &apos;:&apos;).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Not an interface name (1–15 letters, digits, &apos;_&apos;, &apos;.&apos;, &apos;-&apos;).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The loopback interface: NCCL cannot use the loopback aliases.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This looks like a virtual interface, not the CX7 port.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&apos;%1&apos; is not an RDMA device name (like mlx5_0 or mlx5_0:1).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&apos;%1&apos; is listed twice.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>fp8_ds_mla (the same as fp8)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>fp32 (exact reference)</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>EnvStore</name>
    <message>
        <source>The bundled .env.example is missing from this build.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>line %1: %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>command line</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>environment</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>the .env file %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>PORT &apos;%1&apos; (from %2) is not usable: %3</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>QObject</name>
    <message>
        <source>Deployment settings</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The API is not started. Correct PORT on the Setup page, or choose a port on the Server page and turn the API on there.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The API is not started. Correct or unset the PORT environment variable, or choose a port on the Server page and turn the API on there.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Until this is corrected the model is not loaded: correct it in the .env file and load the model on the Server page (a value from the environment or --set needs a restart). A bad MAX_NUM_SEQS or TS_KV_BUDGET_MIB only leaves the Server page&apos;s value in use; a bad TS_MAX_CONCURRENT_REQUESTS keeps the API off.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ts::ui::ChatMessageWidget</name>
    <message>
        <source>You</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Assistant</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copy</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copy this message as Markdown</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Edit</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Edit this message and send it again (the answers after it are replaced)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Reasoning</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copy code</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copy code %1</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ts::ui::ChatPage</name>
    <message>
        <source>New chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Start a new conversation (Ctrl+N)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Delete</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Message (Ctrl+Enter to send)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Send</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Send (Ctrl+Enter)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Stop</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Stop generating (Esc)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Regenerate</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Answer the last message again (Ctrl+R)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 — a random-weight test checkpoint: answers are noise.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 has no tokenizer or chat template: it cannot chat.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Load a model on the Server page to chat.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Some saved conversations could not be read: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Settings</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>System prompt (optional)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>System</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Thinking</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Let the model reason before answering (shown collapsed above the answer).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>0 = greedy (always the most likely token)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Top-p</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>off</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Top-k</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Min-p</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Repetition penalty</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Max tokens</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>random</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Seed</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>waiting…</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>%n token(s)…</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>Error: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> · max tokens reached</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> · stopped</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 tok/s · TTFT %2 ms · %3 tokens%4</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Could not save the conversation: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>(untitled)</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ts::ui::DashboardPage</name>
    <message>
        <source>KV cache</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>blocks in use</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Throughput</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>tokens/s</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>prompt</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>generation</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Requests</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>requests</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>running</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>waiting</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Time to first token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>TTFT</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>seconds</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&lt;b&gt;KV cache&lt;/b&gt; %1 % · %2 / %3 blocks · %4 / %5 tokens</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&lt;b&gt;Throughput&lt;/b&gt; prompt %1 tok/s · generation %2 tok/s · %3 / %4 tokens in total</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&lt;b&gt;Requests&lt;/b&gt; %1 running · %2 waiting · %3 finished</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&lt;b&gt;Time to first token&lt;/b&gt; mean %1 ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> · %1 decode steps from CUDA graphs</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> · system memory %1 GiB available of %2 (shared with the GPU)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> &lt;span style=&quot;color:#c62828&quot;&gt;&lt;b&gt;low&lt;/b&gt;: close other programs; a GB10 can reset when its memory runs out&lt;/span&gt;</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> · GPU memory %1 GiB free of %2</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ts::ui::EngineController</name>
    <message>
        <source>Loading %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Reading config.json</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Mapping and checking the weights</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loading the tokenizer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loading the chat template</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No chat template in %1: the chat playground is unavailable</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No tokenizer.json in %1: the chat playground is unavailable</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Sizing the KV pool</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Load failed: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Ready</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loaded %1: %2 layers, vocabulary %3, KV pool %4 tokens</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model unloaded</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No model is loaded.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This model has no tokenizer or chat template, so it cannot chat.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chat request %1: %2 prompt tokens</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chat request refused: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This build has no HTTP server.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Load a model first.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>HTTP server listening: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>HTTP server failed to start: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>HTTP server stopped</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Backend: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>GPU self-test (every kernel against the CPU reference)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>GPU self-test skipped (SKIP_OVERLAY_VERIFY=1)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>GPU self-test passed: %1 checks</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>GPU memory: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Waiting for device memory</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loading the weights (%1 of %2)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Engine: up to %1 sequences at once, %2 tokens per step, %3 tokens per request at most, KV cache %4</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The engine has stopped: %1. Nothing more runs on this GPU until TwinSpark is restarted; unload the model (the CPU backend still works).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Mapping and checking the weights (layer %1 of %2)</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ts::ui::MainWindow</name>
    <message>
        <source>TwinSpark</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Server</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Dashboard</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Setup</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 (test checkpoint, random weights)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>TwinSpark — %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Load failed: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;File</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Quit</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;View</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Language</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The language changes when TwinSpark starts again.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;Help</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&amp;About TwinSpark</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>About TwinSpark</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>TwinSpark %1 — GLM-5.3-Flash inference with an embedded engine and an OpenAI-compatible API.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loading…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Ready</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Unloading…</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ts::ui::ServerPage</name>
    <message>
        <source>Engine: no model loaded</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Log</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Load failed: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No model loaded</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Browse…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model folder</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Folder</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> MiB</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Memory for the KV pool and the per-request recurrent states.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>KV budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Parallel generations (the recipe&apos;s MAX_NUM_SEQS is 4).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Parallel requests</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Load</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Load the model (Ctrl+L)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Unload</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This is a small generated test checkpoint with random weights: its answers are noise. It shows that the pipeline works, not what the model can do.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>OpenAI API</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Serve the API</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This computer only (127.0.0.1)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The network (0.0.0.0) — needs an API key</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Listen on</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>any free port</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Port</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>none (loopback only)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>API key</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Applies when the API is switched on.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Off</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Status</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Base URL</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Example</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copy curl</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copy URL</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This build has no HTTP server.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Choose the model folder first.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Starting…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Loaded %1: %2 layers, vocabulary %3, KV pool %4 tokens%5</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source> (no chat template: API completions by token ids only)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Listening on %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Not running: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Engine: %1 running, %2 waiting · KV %3 % · %4 tok/s generation</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Not loaded: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 This page&apos;s value is used.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Not started: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The .env file could not be read again (%1): its values as read before are used.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Not loaded: %1 Correct it in the .env file and load again (a value from the environment or --set needs a restart of the control center).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Engine stopped: %1. Restart TwinSpark to use the GPU again.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ts::ui::SetupPage</name>
    <message>
        <source>Open the setup wizard…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Deployment settings: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>(set)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>from the %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Lines the launcher cannot read:</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ts::ui::SetupWizard</name>
    <message>
        <source>TwinSpark setup</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Where the checkpoint is.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Nodes</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The two machines and how the head reaches the worker over SSH.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>API</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The OpenAI-compatible API served on the head node.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Fabric</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The CX7 link between the nodes. Keep the documented pins unless your cabling differs.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Runtime</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Settings the recipe fixes. Forbidden values are shown, and why, but cannot be chosen.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Write .env</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Finish writes the file. Comments and settings this wizard does not know are kept.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Set by the %1 to &apos;%2&apos;: that value wins at run time; this file keeps what you enter here.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 — not allowed</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Browse…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model folder</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Generate</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>A random 32-character key</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>File: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>It did not exist and was created from .env.example.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Lines the launcher cannot read (kept as they are):</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>To fix before writing:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Warnings:</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Some fields are not valid.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Cannot write .env</source>
        <translation type="unfinished"></translation>
    </message>
</context>
</TS>
