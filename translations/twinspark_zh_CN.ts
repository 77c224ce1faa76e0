<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="zh_CN">
<context>
    <name>ConversationStore</name>
    <message>
        <source>%1: cannot be read</source>
        <translation>%1：无法读取</translation>
    </message>
    <message>
        <source>%1: not valid JSON (%2)</source>
        <translation>%1：不是有效的 JSON（%2）</translation>
    </message>
    <message>
        <source>%1: not a conversation file</source>
        <translation>%1：不是对话文件</translation>
    </message>
</context>
<context>
    <name>EngineSettings</name>
    <message>
        <source>the .env file %1</source>
        <translation>.env 文件 %1</translation>
    </message>
    <message>
        <source>%1 &apos;%2&apos; (from %3) is not usable: %4</source>
        <translation>%1 “%2”（来源：%3）不可用：%4</translation>
    </message>
    <message>
        <source>give a whole number from %1 to %2.</source>
        <translation>请填写 %1 到 %2 之间的整数。</translation>
    </message>
    <message>
        <source>give the share of the GPU&apos;s memory to use, above 0 and at most 1 (the recipe&apos;s 0.87).</source>
        <translation>请填写要使用的 GPU 显存比例，大于 0 且不超过 1（配方默认 0.87）。</translation>
    </message>
    <message>
        <source>GLM-5.3-Flash&apos;s sparse MLA kernels read the packed fp8 cache (fp8_ds_mla); give fp8, or fp32 for the exact reference mode.</source>
        <translation>GLM-5.3-Flash 的稀疏 MLA 内核只读取打包的 fp8 缓存（fp8_ds_mla）；请填写 fp8，或用于精确参考模式的 fp32。</translation>
    </message>
    <message>
        <source>give fp8 (the recipe&apos;s) or fp32.</source>
        <translation>请填写 fp8（配方默认）或 fp32。</translation>
    </message>
    <message>
        <source>give auto, cpu or cuda.</source>
        <translation>请填写 auto、cpu 或 cuda。</translation>
    </message>
</context>
<context>
    <name>EnvSchema</name>
    <message>
        <source>NCCL cannot use the 10.0.0.x loopback aliases: its traffic is pinned to the CX7 interfaces and RDMA devices on the Fabric page, and wrong pins hang initialisation (ncclCommInitRank) instead of failing.</source>
        <translation>NCCL 不能使用 10.0.0.x 回环别名：其流量固定绑定到“CX7 网络”页面上的 CX7 接口和 RDMA 设备；绑定错误会使初始化（ncclCommInitRank）挂起，而不是报错失败。</translation>
    </message>
    <message>
        <source>Model folder</source>
        <translation>模型文件夹</translation>
    </message>
    <message>
        <source>The checkpoint folder: config.json, the *.safetensors shards and tokenizer.json. The production model is Mia-AiLab/GLM-5.3-Flash-EXL3-TR3-4bpw (120 shards, about 164 GiB).</source>
        <translation>检查点文件夹：包含 config.json、*.safetensors 分片和 tokenizer.json。生产环境使用的模型是 Mia-AiLab/GLM-5.3-Flash-EXL3-TR3-4bpw（120 个分片，约 164 GiB）。</translation>
    </message>
    <message>
        <source>Head address</source>
        <translation>头节点地址</translation>
    </message>
    <message>
        <source>This machine: rank 0, the scheduler, the API and the NCCL master. </source>
        <translation>本机：rank 0，运行调度器、API 和 NCCL 主节点。 </translation>
    </message>
    <message>
        <source>Worker address</source>
        <translation>工作节点地址</translation>
    </message>
    <message>
        <source>The second Spark (rank 1), reached over SSH. It must differ from the head address.</source>
        <translation>第二台 Spark（rank 1），通过 SSH 访问。它必须与头节点地址不同。</translation>
    </message>
    <message>
        <source>Worker SSH user</source>
        <translation>工作节点 SSH 用户</translation>
    </message>
    <message>
        <source>The account on the worker, when it differs from yours here. Passwordless SSH from the head to the worker is required. Empty: the same user name.</source>
        <translation>工作节点上的账户（当它与你在本机上的账户不同时）。要求头节点能够免密码 SSH 登录工作节点。留空：使用相同的用户名。</translation>
    </message>
    <message>
        <source>Worker home</source>
        <translation>工作节点主目录</translation>
    </message>
    <message>
        <source>Home directory (and Hugging Face cache location) on the worker, when it differs. An absolute path; empty: the same as here.</source>
        <translation>工作节点上的主目录（以及 Hugging Face 缓存位置），在与本机不同时填写。须为绝对路径；留空：与本机相同。</translation>
    </message>
    <message>
        <source>API port</source>
        <translation>API 端口</translation>
    </message>
    <message>
        <source>Port of the OpenAI-compatible API on the head node (base URL http://HEAD:PORT/v1).</source>
        <translation>头节点上 OpenAI 兼容 API 的端口（基础 URL 为 http://HEAD:PORT/v1）。</translation>
    </message>
    <message>
        <source>API key</source>
        <translation>API 密钥</translation>
    </message>
    <message>
        <source>Bearer key that API clients must send. Without one the API has no authentication: the recipe warns to always set it in production.</source>
        <translation>API 客户端必须发送的 Bearer 密钥。未设置时 API 没有任何身份验证：部署方案提醒，在生产环境中务必设置。</translation>
    </message>
    <message>
        <source>Head CX7 interface</source>
        <translation>头节点 CX7 接口</translation>
    </message>
    <message>
        <source>Network interface of the CX7 link on the head (see `ip -br link`). </source>
        <translation>头节点上 CX7 链路的网络接口（参见 `ip -br link`）。 </translation>
    </message>
    <message>
        <source>Worker CX7 interface</source>
        <translation>工作节点 CX7 接口</translation>
    </message>
    <message>
        <source>Network interface of the CX7 link on the worker. Keep the documented pins unless your cabling differs.</source>
        <translation>工作节点上 CX7 链路的网络接口。除非你的布线不同，否则请保留文档中指定的固定值。</translation>
    </message>
    <message>
        <source>Head RDMA devices</source>
        <translation>头节点 RDMA 设备</translation>
    </message>
    <message>
        <source>RDMA (HCA) devices of the CX7 link on the head, comma-separated (see `ibdev2netdev`). Wrong devices hang NCCL initialisation.</source>
        <translation>头节点上 CX7 链路的 RDMA（HCA）设备，以逗号分隔（参见 `ibdev2netdev`）。设备错误会使 NCCL 初始化挂起。</translation>
    </message>
    <message>
        <source>Worker RDMA devices</source>
        <translation>工作节点 RDMA 设备</translation>
    </message>
    <message>
        <source>RDMA devices of the CX7 link on the worker, comma-separated.</source>
        <translation>工作节点上 CX7 链路的 RDMA 设备，以逗号分隔。</translation>
    </message>
    <message>
        <source>KV cache type</source>
        <translation>KV 缓存类型</translation>
    </message>
    <message>
        <source>Storage of the target model&apos;s KV cache. The sparse MLA kernels take packed fp8_ds_mla only, so the recipe keeps fp8.</source>
        <translation>目标模型 KV 缓存的存储格式。稀疏 MLA 内核只接受打包的 fp8_ds_mla，因此部署方案固定使用 fp8。</translation>
    </message>
    <message>
        <source>MoE backend</source>
        <translation>MoE 后端</translation>
    </message>
    <message>
        <source>How routed experts run. EXL3 weights need their own packed-expert path.</source>
        <translation>路由专家的运行方式。EXL3 权重需要其专用的打包专家路径。</translation>
    </message>
    <message>
        <source>Draft attention</source>
        <translation>草稿注意力</translation>
    </message>
    <message>
        <source>Attention backend of the speculative draft model (used once speculative decoding is available). Left to the automatic choice, FLASH_ATTN.</source>
        <translation>推测解码草稿模型的注意力后端（在推测解码可用后使用）。保持自动选择，即 FLASH_ATTN。</translation>
    </message>
    <message>
        <source>fp8 (packed fp8_ds_mla)</source>
        <translation>fp8（打包 fp8_ds_mla）</translation>
    </message>
    <message>
        <source>bf16</source>
        <translation>bf16</translation>
    </message>
    <message>
        <source>Forbidden: there is no sparse MLA kernel for a BF16 KV cache.</source>
        <translation>禁止：没有适用于 BF16 KV 缓存的稀疏 MLA 内核。</translation>
    </message>
    <message>
        <source>nvfp4</source>
        <translation>nvfp4</translation>
    </message>
    <message>
        <source>Forbidden: the NVFP4 KV kernels are for dense MHA, not sparse MLA.</source>
        <translation>禁止：NVFP4 KV 内核用于稠密 MHA，而非稀疏 MLA。</translation>
    </message>
    <message>
        <source>EXL3 packed experts</source>
        <translation>EXL3 打包专家</translation>
    </message>
    <message>
        <source>marlin</source>
        <translation>marlin</translation>
    </message>
    <message>
        <source>Forbidden: this deployment uses EXL3 weights and their own packed-expert method; --moe-backend marlin is not allowed.</source>
        <translation>禁止：本部署使用 EXL3 权重及其专用的打包专家方法；不允许使用 --moe-backend marlin。</translation>
    </message>
    <message>
        <source>automatic (FLASH_ATTN)</source>
        <translation>自动（FLASH_ATTN）</translation>
    </message>
    <message>
        <source>TRITON_ATTN</source>
        <translation>TRITON_ATTN</translation>
    </message>
    <message>
        <source>Forbidden: TRITON_ATTN makes attention inside the draft block causal; acceptance collapsed and speed fell from 61.7 to about 29 tok/s.</source>
        <translation>禁止：TRITON_ATTN 会使草稿块内部的注意力变为因果注意力；接受率骤降，速度从 61.7 降至约 29 tok/s。</translation>
    </message>
    <message>
        <source>Remove the spaces around the value.</source>
        <translation>请删除值两端的空格。</translation>
    </message>
    <message>
        <source>A port is a number from 1 to 65535.</source>
        <translation>端口是 1 到 65535 之间的数字。</translation>
    </message>
    <message>
        <source>Ports below 1024 need administrator rights.</source>
        <translation>低于 1024 的端口需要管理员权限。</translation>
    </message>
    <message>
        <source>Not a valid user name (lower-case letters, digits, &apos;_&apos; and &apos;-&apos;).</source>
        <translation>不是有效的用户名（小写字母、数字、&apos;_&apos; 和 &apos;-&apos;）。</translation>
    </message>
    <message>
        <source>Give an absolute path (starting with /).</source>
        <translation>请提供绝对路径（以 / 开头）。</translation>
    </message>
    <message>
        <source>Spaces in the path: make sure the worker&apos;s scripts quote it.</source>
        <translation>路径中含有空格：请确保工作节点上的脚本对其加了引号。</translation>
    </message>
    <message>
        <source>No API key: anyone who can reach the port can use the API.</source>
        <translation>未设置 API 密钥：任何能访问该端口的人都可以使用 API。</translation>
    </message>
    <message>
        <source>The key cannot contain spaces.</source>
        <translation>密钥不能包含空格。</translation>
    </message>
    <message>
        <source>A short key is easy to guess; use 12 characters or more.</source>
        <translation>过短的密钥容易被猜中；请使用 12 个或更多字符。</translation>
    </message>
    <message>
        <source>Unknown value &apos;%1&apos;.</source>
        <translation>未知值“%1”。</translation>
    </message>
    <message>
        <source>No model folder yet: the Server page will ask for one.</source>
        <translation>尚未设置模型文件夹：“服务器”页面会要求你选择一个。</translation>
    </message>
    <message>
        <source>Give an absolute path.</source>
        <translation>请提供绝对路径。</translation>
    </message>
    <message>
        <source>This folder does not exist.</source>
        <translation>此文件夹不存在。</translation>
    </message>
    <message>
        <source>This is a file, not a folder.</source>
        <translation>这是一个文件，而不是文件夹。</translation>
    </message>
    <message>
        <source>No config.json in this folder: it is not a checkpoint.</source>
        <translation>此文件夹中没有 config.json：它不是检查点。</translation>
    </message>
    <message>
        <source>No tokenizer.json: the model can run, but not chat.</source>
        <translation>没有 tokenizer.json：模型可以运行，但无法聊天。</translation>
    </message>
    <message>
        <source>An IPv4 address looks like 10.0.0.1 (four numbers from 0 to 255).</source>
        <translation>IPv4 地址形如 10.0.0.1（四个 0 到 255 之间的数字）。</translation>
    </message>
    <message>
        <source>A loopback address (127.x) cannot be reached from the other node.</source>
        <translation>回环地址（127.x）无法从另一个节点访问。</translation>
    </message>
    <message>
        <source>Not a host address.</source>
        <translation>不是主机地址。</translation>
    </message>
    <message>
        <source>The head and worker addresses must differ.</source>
        <translation>头节点地址和工作节点地址必须不同。</translation>
    </message>
    <message>
        <source>Needed for the two-node setup only.</source>
        <translation>仅在双节点部署时需要。</translation>
    </message>
    <message>
        <source>&apos;%1&apos; is an address alias; NCCL needs the interface itself (without &apos;:&apos;).</source>
        <translation>“%1”是地址别名；NCCL 需要接口本身（不带 &apos;:&apos;）。</translation>
    </message>
    <message>
        <source>Not an interface name (1–15 letters, digits, &apos;_&apos;, &apos;.&apos;, &apos;-&apos;).</source>
        <translation>不是接口名（1–15 个字母、数字、&apos;_&apos;、&apos;.&apos;、&apos;-&apos;）。</translation>
    </message>
    <message>
        <source>The loopback interface: NCCL cannot use the loopback aliases.</source>
        <translation>这是回环接口：NCCL 不能使用回环别名。</translation>
    </message>
    <message>
        <source>This looks like a virtual interface, not the CX7 port.</source>
        <translation>这看起来是虚拟接口，而不是 CX7 端口。</translation>
    </message>
    <message>
        <source>&apos;%1&apos; is not an RDMA device name (like mlx5_0 or mlx5_0:1).</source>
        <translation>“%1”不是 RDMA 设备名（应类似 mlx5_0 或 mlx5_0:1）。</translation>
    </message>
    <message>
        <source>&apos;%1&apos; is listed twice.</source>
        <translation>“%1”被列出了两次。</translation>
    </message>
    <message>
        <source>fp8_ds_mla (the same as fp8)</source>
        <translation>fp8_ds_mla（与 fp8 相同）</translation>
    </message>
    <message>
        <source>fp32 (exact reference)</source>
        <translation>fp32（精确参考）</translation>
    </message>
</context>
<context>
    <name>EnvStore</name>
    <message>
        <source>The bundled .env.example is missing from this build.</source>
        <translation>此构建中缺少内置的 .env.example。</translation>
    </message>
    <message>
        <source>line %1: %2</source>
        <translation>第 %1 行：%2</translation>
    </message>
    <message>
        <source>command line</source>
        <translation>命令行</translation>
    </message>
    <message>
        <source>environment</source>
        <translation>环境变量</translation>
    </message>
    <message>
        <source>the .env file %1</source>
        <translation>.env 文件 %1</translation>
    </message>
    <message>
        <source>PORT &apos;%1&apos; (from %2) is not usable: %3</source>
        <translation>PORT “%1”（来源：%2）不可用：%3</translation>
    </message>
</context>
<context>
    <name>QObject</name>
    <message>
        <source>Deployment settings</source>
        <translation>部署设置</translation>
    </message>
    <message>
        <source>The API is not started. Correct PORT on the Setup page, or choose a port on the Server page and turn the API on there.</source>
        <translation>API 未启动。请在“设置”页面更正 PORT，或在“服务器”页面选择端口并在那里开启 API。</translation>
    </message>
    <message>
        <source>The API is not started. Correct or unset the PORT environment variable, or choose a port on the Server page and turn the API on there.</source>
        <translation>API 未启动。请更正或取消设置 PORT 环境变量，或在“服务器”页面选择端口并在那里开启 API。</translation>
    </message>
    <message>
        <source>Until this is corrected the model is not loaded: correct it in the .env file and load the model on the Server page (a value from the environment or --set needs a restart). A bad MAX_NUM_SEQS or TS_KV_BUDGET_MIB only leaves the Server page&apos;s value in use; a bad TS_MAX_CONCURRENT_REQUESTS keeps the API off.</source>
        <translation>更正之前不会加载模型：请在 .env 文件中更正，然后在“服务器”页面加载模型（来自环境变量或 --set 的值需要重新启动）。MAX_NUM_SEQS 或 TS_KV_BUDGET_MIB 无效时只沿用“服务器”页面上的值；TS_MAX_CONCURRENT_REQUESTS 无效时 API 保持关闭。</translation>
    </message>
</context>
<context>
    <name>ts::ui::ChatMessageWidget</name>
    <message>
        <source>You</source>
        <translation>你</translation>
    </message>
    <message>
        <source>Assistant</source>
        <translation>助手</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>复制</translation>
    </message>
    <message>
        <source>Copy this message as Markdown</source>
        <translation>以 Markdown 格式复制此消息</translation>
    </message>
    <message>
        <source>Edit</source>
        <translation>编辑</translation>
    </message>
    <message>
        <source>Edit this message and send it again (the answers after it are replaced)</source>
        <translation>编辑此消息并重新发送（其后的回答将被替换）</translation>
    </message>
    <message>
        <source>Reasoning</source>
        <translation>推理过程</translation>
    </message>
    <message>
        <source>Copy code</source>
        <translation>复制代码</translation>
    </message>
    <message>
        <source>Copy code %1</source>
        <translation>复制代码 %1</translation>
    </message>
</context>
<context>
    <name>ts::ui::ChatPage</name>
    <message>
        <source>New chat</source>
        <translation>新对话</translation>
    </message>
    <message>
        <source>Start a new conversation (Ctrl+N)</source>
        <translation>开始新对话（Ctrl+N）</translation>
    </message>
    <message>
        <source>Delete</source>
        <translation>删除</translation>
    </message>
    <message>
        <source>Message (Ctrl+Enter to send)</source>
        <translation>消息（按 Ctrl+Enter 发送）</translation>
    </message>
    <message>
        <source>Send</source>
        <translation>发送</translation>
    </message>
    <message>
        <source>Send (Ctrl+Enter)</source>
        <translation>发送（Ctrl+Enter）</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>停止</translation>
    </message>
    <message>
        <source>Stop generating (Esc)</source>
        <translation>停止生成（Esc）</translation>
    </message>
    <message>
        <source>Regenerate</source>
        <translation>重新生成</translation>
    </message>
    <message>
        <source>Answer the last message again (Ctrl+R)</source>
        <translation>重新回答最后一条消息（Ctrl+R）</translation>
    </message>
    <message>
        <source>%1 — a random-weight test checkpoint: answers are noise.</source>
        <translation>%1 — 随机权重的测试检查点：回答是无意义的噪声。</translation>
    </message>
    <message>
        <source>Model: %1</source>
        <translation>模型：%1</translation>
    </message>
    <message>
        <source>%1 has no tokenizer or chat template: it cannot chat.</source>
        <translation>%1 没有分词器或聊天模板：无法聊天。</translation>
    </message>
    <message>
        <source>Load a model on the Server page to chat.</source>
        <translation>请在“服务器”页面加载模型后再聊天。</translation>
    </message>
    <message>
        <source>Some saved conversations could not be read: %1</source>
        <translation>部分已保存的对话无法读取：%1</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>设置</translation>
    </message>
    <message>
        <source>System prompt (optional)</source>
        <translation>系统提示词（可选）</translation>
    </message>
    <message>
        <source>System</source>
        <translation>系统</translation>
    </message>
    <message>
        <source>Thinking</source>
        <translation>思考</translation>
    </message>
    <message>
        <source>Let the model reason before answering (shown collapsed above the answer).</source>
        <translation>让模型在回答前先进行推理（推理内容折叠显示在回答上方）。</translation>
    </message>
    <message>
        <source>0 = greedy (always the most likely token)</source>
        <translation>0 = 贪心（始终选择概率最高的 token）</translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation>温度</translation>
    </message>
    <message>
        <source>Top-p</source>
        <translation>Top-p</translation>
    </message>
    <message>
        <source>off</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>Top-k</source>
        <translation>Top-k</translation>
    </message>
    <message>
        <source>Min-p</source>
        <translation>Min-p</translation>
    </message>
    <message>
        <source>Repetition penalty</source>
        <translation>重复惩罚</translation>
    </message>
    <message>
        <source>Max tokens</source>
        <translation>最大 token 数</translation>
    </message>
    <message>
        <source>random</source>
        <translation>随机</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>种子</translation>
    </message>
    <message>
        <source>waiting…</source>
        <translation>等待中…</translation>
    </message>
    <message numerus="yes">
        <source>%n token(s)…</source>
        <translation>
            <numerusform>%n 个 token…</numerusform>
        </translation>
    </message>
    <message>
        <source>Error: %1</source>
        <translation>错误：%1</translation>
    </message>
    <message>
        <source> · max tokens reached</source>
        <translation> · 已达到最大 token 数</translation>
    </message>
    <message>
        <source> · stopped</source>
        <translation> · 已停止</translation>
    </message>
    <message>
        <source>%1 tok/s · TTFT %2 ms · %3 tokens%4</source>
        <translation>%1 tok/s · TTFT %2 ms · %3 个 token%4</translation>
    </message>
    <message>
        <source>Could not save the conversation: %1</source>
        <translation>无法保存对话：%1</translation>
    </message>
    <message>
        <source>(untitled)</source>
        <translation>（无标题）</translation>
    </message>
</context>
<context>
    <name>ts::ui::DashboardPage</name>
    <message>
        <source>KV cache</source>
        <translation>KV 缓存</translation>
    </message>
    <message>
        <source>blocks in use</source>
        <translation>已用块数</translation>
    </message>
    <message>
        <source>Throughput</source>
        <translation>吞吐量</translation>
    </message>
    <message>
        <source>tokens/s</source>
        <translation>token/s</translation>
    </message>
    <message>
        <source>prompt</source>
        <translation>提示词</translation>
    </message>
    <message>
        <source>generation</source>
        <translation>生成</translation>
    </message>
    <message>
        <source>Requests</source>
        <translation>请求</translation>
    </message>
    <message>
        <source>requests</source>
        <translation>请求数</translation>
    </message>
    <message>
        <source>running</source>
        <translation>运行中</translation>
    </message>
    <message>
        <source>waiting</source>
        <translation>等待中</translation>
    </message>
    <message>
        <source>Time to first token</source>
        <translation>首 token 时间</translation>
    </message>
    <message>
        <source>ms</source>
        <translation>ms</translation>
    </message>
    <message>
        <source>TTFT</source>
        <translation>TTFT</translation>
    </message>
    <message>
        <source>seconds</source>
        <translation>秒</translation>
    </message>
    <message>
        <source>&lt;b&gt;KV cache&lt;/b&gt; %1 % · %2 / %3 blocks · %4 / %5 tokens</source>
        <translation>&lt;b&gt;KV 缓存&lt;/b&gt; %1 % · %2 / %3 块 · %4 / %5 个 token</translation>
    </message>
    <message>
        <source>&lt;b&gt;Throughput&lt;/b&gt; prompt %1 tok/s · generation %2 tok/s · %3 / %4 tokens in total</source>
        <translation>&lt;b&gt;吞吐量&lt;/b&gt; 提示词 %1 tok/s · 生成 %2 tok/s · 累计 %3 / %4 个 token</translation>
    </message>
    <message>
        <source>&lt;b&gt;Requests&lt;/b&gt; %1 running · %2 waiting · %3 finished</source>
        <translation>&lt;b&gt;请求&lt;/b&gt; 运行中 %1 · 等待中 %2 · 已完成 %3</translation>
    </message>
    <message>
        <source>&lt;b&gt;Time to first token&lt;/b&gt; mean %1 ms</source>
        <translation>&lt;b&gt;首 token 时间&lt;/b&gt; 平均 %1 ms</translation>
    </message>
    <message>
        <source> · %1 decode steps from CUDA graphs</source>
        <translation> · %1 个解码步骤来自 CUDA 图</translation>
    </message>
    <message>
        <source> · system memory %1 GiB available of %2 (shared with the GPU)</source>
        <translation> · 系统内存可用 %1 GiB，共 %2（与 GPU 共享）</translation>
    </message>
    <message>
        <source> &lt;span style=&quot;color:#c62828&quot;&gt;&lt;b&gt;low&lt;/b&gt;: close other programs; a GB10 can reset when its memory runs out&lt;/span&gt;</source>
        <translation> &lt;span style=&quot;color:#c62828&quot;&gt;&lt;b&gt;偏低&lt;/b&gt;：请关闭其他程序；GB10 在内存耗尽时可能会重置&lt;/span&gt;</translation>
    </message>
    <message>
        <source> · GPU memory %1 GiB free of %2</source>
        <translation> · GPU 内存空闲 %1 GiB，共 %2</translation>
    </message>
</context>
<context>
    <name>ts::ui::EngineController</name>
    <message>
        <source>Loading %1</source>
        <translation>正在加载 %1</translation>
    </message>
    <message>
        <source>Reading config.json</source>
        <translation>正在读取 config.json</translation>
    </message>
    <message>
        <source>Mapping and checking the weights</source>
        <translation>正在映射并检查权重</translation>
    </message>
    <message>
        <source>Loading the tokenizer</source>
        <translation>正在加载分词器</translation>
    </message>
    <message>
        <source>Loading the chat template</source>
        <translation>正在加载聊天模板</translation>
    </message>
    <message>
        <source>No chat template in %1: the chat playground is unavailable</source>
        <translation>%1 中没有聊天模板：聊天演练场不可用</translation>
    </message>
    <message>
        <source>No tokenizer.json in %1: the chat playground is unavailable</source>
        <translation>%1 中没有 tokenizer.json：聊天演练场不可用</translation>
    </message>
    <message>
        <source>Sizing the KV pool</source>
        <translation>正在确定 KV 池大小</translation>
    </message>
    <message>
        <source>Load failed: %1</source>
        <translation>加载失败：%1</translation>
    </message>
    <message>
        <source>Ready</source>
        <translation>就绪</translation>
    </message>
    <message>
        <source>Loaded %1: %2 layers, vocabulary %3, KV pool %4 tokens</source>
        <translation>已加载 %1：%2 层，词表 %3，KV 池 %4 个 token</translation>
    </message>
    <message>
        <source>Model unloaded</source>
        <translation>模型已卸载</translation>
    </message>
    <message>
        <source>No model is loaded.</source>
        <translation>未加载模型。</translation>
    </message>
    <message>
        <source>This model has no tokenizer or chat template, so it cannot chat.</source>
        <translation>此模型没有分词器或聊天模板，因此无法聊天。</translation>
    </message>
    <message>
        <source>Chat request %1: %2 prompt tokens</source>
        <translation>聊天请求 %1：%2 个提示词 token</translation>
    </message>
    <message>
        <source>Chat request refused: %1</source>
        <translation>聊天请求被拒绝：%1</translation>
    </message>
    <message>
        <source>This build has no HTTP server.</source>
        <translation>此构建不包含 HTTP 服务器。</translation>
    </message>
    <message>
        <source>Load a model first.</source>
        <translation>请先加载模型。</translation>
    </message>
    <message>
        <source>HTTP server listening: %1</source>
        <translation>HTTP 服务器正在监听：%1</translation>
    </message>
    <message>
        <source>HTTP server failed to start: %1</source>
        <translation>HTTP 服务器启动失败：%1</translation>
    </message>
    <message>
        <source>HTTP server stopped</source>
        <translation>HTTP 服务器已停止</translation>
    </message>
    <message>
        <source>Backend: %1</source>
        <translation>后端：%1</translation>
    </message>
    <message>
        <source>GPU self-test (every kernel against the CPU reference)</source>
        <translation>GPU 自检（将每个内核与 CPU 参考实现进行对比）</translation>
    </message>
    <message>
        <source>GPU self-test skipped (SKIP_OVERLAY_VERIFY=1)</source>
        <translation>已跳过 GPU 自检（SKIP_OVERLAY_VERIFY=1）</translation>
    </message>
    <message>
        <source>GPU self-test passed: %1 checks</source>
        <translation>GPU 自检通过：%1 项检查</translation>
    </message>
    <message>
        <source>GPU memory: %1</source>
        <translation>GPU 内存：%1</translation>
    </message>
    <message>
        <source>Waiting for device memory</source>
        <translation>正在等待设备内存</translation>
    </message>
    <message>
        <source>Loading the weights (%1 of %2)</source>
        <translation>正在加载权重（%1 / %2）</translation>
    </message>
    <message>
        <source>Engine: up to %1 sequences at once, %2 tokens per step, %3 tokens per request at most, KV cache %4</source>
        <translation>引擎：最多同时 %1 个序列，每步 %2 个 token，每个请求最多 %3 个 token，KV 缓存 %4</translation>
    </message>
    <message>
        <source>The engine has stopped: %1. Nothing more runs on this GPU until TwinSpark is restarted; unload the model (the CPU backend still works).</source>
        <translation>引擎已停止：%1。在重新启动 TwinSpark 之前，此 GPU 上无法再运行任何任务；请卸载模型（CPU 后端仍可使用）。</translation>
    </message>
    <message>
        <source>Mapping and checking the weights (layer %1 of %2)</source>
        <translation>正在映射并检查权重（第 %1 层，共 %2 层）</translation>
    </message>
</context>
<context>
    <name>ts::ui::MainWindow</name>
    <message>
        <source>TwinSpark</source>
        <translation>TwinSpark</translation>
    </message>
    <message>
        <source>Server</source>
        <translation>服务器</translation>
    </message>
    <message>
        <source>Dashboard</source>
        <translation>仪表板</translation>
    </message>
    <message>
        <source>Chat</source>
        <translation>聊天</translation>
    </message>
    <message>
        <source>Setup</source>
        <translation>设置</translation>
    </message>
    <message>
        <source>%1 (test checkpoint, random weights)</source>
        <translation>%1（测试检查点，随机权重）</translation>
    </message>
    <message>
        <source>TwinSpark — %1</source>
        <translation>TwinSpark — %1</translation>
    </message>
    <message>
        <source>Load failed: %1</source>
        <translation>加载失败：%1</translation>
    </message>
    <message>
        <source>&amp;File</source>
        <translation>文件(&amp;F)</translation>
    </message>
    <message>
        <source>&amp;Quit</source>
        <translation>退出(&amp;Q)</translation>
    </message>
    <message>
        <source>&amp;View</source>
        <translation>视图(&amp;V)</translation>
    </message>
    <message>
        <source>&amp;Language</source>
        <translation>语言(&amp;L)</translation>
    </message>
    <message>
        <source>The language changes when TwinSpark starts again.</source>
        <translation>语言将在 TwinSpark 重新启动后更改。</translation>
    </message>
    <message>
        <source>&amp;Help</source>
        <translation>帮助(&amp;H)</translation>
    </message>
    <message>
        <source>&amp;About TwinSpark</source>
        <translation>关于 TwinSpark(&amp;A)</translation>
    </message>
    <message>
        <source>About TwinSpark</source>
        <translation>关于 TwinSpark</translation>
    </message>
    <message>
        <source>TwinSpark %1 — GLM-5.3-Flash inference with an embedded engine and an OpenAI-compatible API.</source>
        <translation>TwinSpark %1 — 基于内置引擎和 OpenAI 兼容 API 的 GLM-5.3-Flash 推理。</translation>
    </message>
    <message>
        <source>No model</source>
        <translation>无模型</translation>
    </message>
    <message>
        <source>Loading…</source>
        <translation>加载中…</translation>
    </message>
    <message>
        <source>Ready</source>
        <translation>就绪</translation>
    </message>
    <message>
        <source>Unloading…</source>
        <translation>卸载中…</translation>
    </message>
</context>
<context>
    <name>ts::ui::ServerPage</name>
    <message>
        <source>Engine: no model loaded</source>
        <translation>引擎：未加载模型</translation>
    </message>
    <message>
        <source>Log</source>
        <translation>日志</translation>
    </message>
    <message>
        <source>Load failed: %1</source>
        <translation>加载失败：%1</translation>
    </message>
    <message>
        <source>No model loaded</source>
        <translation>未加载模型</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>Browse…</source>
        <translation>浏览…</translation>
    </message>
    <message>
        <source>Model folder</source>
        <translation>模型文件夹</translation>
    </message>
    <message>
        <source>Folder</source>
        <translation>文件夹</translation>
    </message>
    <message>
        <source> MiB</source>
        <translation> MiB</translation>
    </message>
    <message>
        <source>Memory for the KV pool and the per-request recurrent states.</source>
        <translation>用于 KV 池和每个请求的循环状态的内存。</translation>
    </message>
    <message>
        <source>KV budget</source>
        <translation>KV 预算</translation>
    </message>
    <message>
        <source>Parallel generations (the recipe&apos;s MAX_NUM_SEQS is 4).</source>
        <translation>并行生成数（部署方案中的 MAX_NUM_SEQS 为 4）。</translation>
    </message>
    <message>
        <source>Parallel requests</source>
        <translation>并行请求数</translation>
    </message>
    <message>
        <source>Load</source>
        <translation>加载</translation>
    </message>
    <message>
        <source>Load the model (Ctrl+L)</source>
        <translation>加载模型（Ctrl+L）</translation>
    </message>
    <message>
        <source>Unload</source>
        <translation>卸载</translation>
    </message>
    <message>
        <source>This is a small generated test checkpoint with random weights: its answers are noise. It shows that the pipeline works, not what the model can do.</source>
        <translation>这是一个生成的小型测试检查点，权重是随机的：它的回答是无意义的噪声。它只能表明流程可以正常运行，不能体现模型的能力。</translation>
    </message>
    <message>
        <source>OpenAI API</source>
        <translation>OpenAI API</translation>
    </message>
    <message>
        <source>Serve the API</source>
        <translation>提供 API 服务</translation>
    </message>
    <message>
        <source>This computer only (127.0.0.1)</source>
        <translation>仅本机（127.0.0.1）</translation>
    </message>
    <message>
        <source>The network (0.0.0.0) — needs an API key</source>
        <translation>网络（0.0.0.0）— 需要 API 密钥</translation>
    </message>
    <message>
        <source>Listen on</source>
        <translation>监听地址</translation>
    </message>
    <message>
        <source>any free port</source>
        <translation>任意空闲端口</translation>
    </message>
    <message>
        <source>Port</source>
        <translation>端口</translation>
    </message>
    <message>
        <source>none (loopback only)</source>
        <translation>无（仅限回环）</translation>
    </message>
    <message>
        <source>API key</source>
        <translation>API 密钥</translation>
    </message>
    <message>
        <source>Applies when the API is switched on.</source>
        <translation>在开启 API 时生效。</translation>
    </message>
    <message>
        <source>Off</source>
        <translation>已关闭</translation>
    </message>
    <message>
        <source>Status</source>
        <translation>状态</translation>
    </message>
    <message>
        <source>Base URL</source>
        <translation>基础 URL</translation>
    </message>
    <message>
        <source>Example</source>
        <translation>示例</translation>
    </message>
    <message>
        <source>Copy curl</source>
        <translation>复制 curl 命令</translation>
    </message>
    <message>
        <source>Copy URL</source>
        <translation>复制 URL</translation>
    </message>
    <message>
        <source>This build has no HTTP server.</source>
        <translation>此构建不包含 HTTP 服务器。</translation>
    </message>
    <message>
        <source>Choose the model folder first.</source>
        <translation>请先选择模型文件夹。</translation>
    </message>
    <message>
        <source>Starting…</source>
        <translation>正在启动…</translation>
    </message>
    <message>
        <source>Loaded %1: %2 layers, vocabulary %3, KV pool %4 tokens%5</source>
        <translation>已加载 %1：%2 层，词表 %3，KV 池 %4 个 token%5</translation>
    </message>
    <message>
        <source> (no chat template: API completions by token ids only)</source>
        <translation> （无聊天模板：API 只能按 token ID 进行补全）</translation>
    </message>
    <message>
        <source>Listening on %1</source>
        <translation>正在监听 %1</translation>
    </message>
    <message>
        <source>Not running: %1</source>
        <translation>未运行：%1</translation>
    </message>
    <message>
        <source>Engine: %1 running, %2 waiting · KV %3 % · %4 tok/s generation</source>
        <translation>引擎：%1 个运行中，%2 个等待中 · KV %3 % · 生成 %4 tok/s</translation>
    </message>
    <message>
        <source>Not loaded: %1</source>
        <translation>未加载：%1</translation>
    </message>
    <message>
        <source>%1 This page&apos;s value is used.</source>
        <translation>%1 将使用本页面上的值。</translation>
    </message>
    <message>
        <source>Not started: %1</source>
        <translation>未启动：%1</translation>
    </message>
    <message>
        <source>The .env file could not be read again (%1): its values as read before are used.</source>
        <translation>无法重新读取 .env 文件（%1）：将沿用之前读取的值。</translation>
    </message>
    <message>
        <source>Not loaded: %1 Correct it in the .env file and load again (a value from the environment or --set needs a restart of the control center).</source>
        <translation>未加载：%1 请在 .env 文件中更正后重新加载（来自环境变量或 --set 的值需要重新启动控制中心）。</translation>
    </message>
    <message>
        <source>Engine stopped: %1. Restart TwinSpark to use the GPU again.</source>
        <translation>引擎已停止：%1。请重新启动 TwinSpark 以再次使用 GPU。</translation>
    </message>
</context>
<context>
    <name>ts::ui::SetupPage</name>
    <message>
        <source>Open the setup wizard…</source>
        <translation>打开设置向导…</translation>
    </message>
    <message>
        <source>Deployment settings: %1</source>
        <translation>部署设置：%1</translation>
    </message>
    <message>
        <source>(set)</source>
        <translation>（已设置）</translation>
    </message>
    <message>
        <source>from the %1</source>
        <translation>来源：%1</translation>
    </message>
    <message>
        <source>Lines the launcher cannot read:</source>
        <translation>启动器无法读取的行：</translation>
    </message>
</context>
<context>
    <name>ts::ui::SetupWizard</name>
    <message>
        <source>TwinSpark setup</source>
        <translation>TwinSpark 设置向导</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>Where the checkpoint is.</source>
        <translation>检查点所在位置。</translation>
    </message>
    <message>
        <source>Nodes</source>
        <translation>节点</translation>
    </message>
    <message>
        <source>The two machines and how the head reaches the worker over SSH.</source>
        <translation>两台机器，以及头节点如何通过 SSH 访问工作节点。</translation>
    </message>
    <message>
        <source>API</source>
        <translation>API</translation>
    </message>
    <message>
        <source>The OpenAI-compatible API served on the head node.</source>
        <translation>在头节点上提供的 OpenAI 兼容 API。</translation>
    </message>
    <message>
        <source>Fabric</source>
        <translation>CX7 网络</translation>
    </message>
    <message>
        <source>The CX7 link between the nodes. Keep the documented pins unless your cabling differs.</source>
        <translation>节点之间的 CX7 链路。除非你的布线不同，否则请保留文档中指定的固定值。</translation>
    </message>
    <message>
        <source>Runtime</source>
        <translation>运行时</translation>
    </message>
    <message>
        <source>Settings the recipe fixes. Forbidden values are shown, and why, but cannot be chosen.</source>
        <translation>由部署方案固定的设置。禁止的值会连同原因一起显示，但不能选择。</translation>
    </message>
    <message>
        <source>Write .env</source>
        <translation>写入 .env</translation>
    </message>
    <message>
        <source>Finish writes the file. Comments and settings this wizard does not know are kept.</source>
        <translation>点击“完成”即写入文件。文件中的注释以及此向导不认识的设置都会保留。</translation>
    </message>
    <message>
        <source>Set by the %1 to &apos;%2&apos;: that value wins at run time; this file keeps what you enter here.</source>
        <translation>已由%1设为“%2”：运行时以该值为准；此文件保存你在此处输入的值。</translation>
    </message>
    <message>
        <source>%1 — not allowed</source>
        <translation>%1 — 不允许</translation>
    </message>
    <message>
        <source>Browse…</source>
        <translation>浏览…</translation>
    </message>
    <message>
        <source>Model folder</source>
        <translation>模型文件夹</translation>
    </message>
    <message>
        <source>Generate</source>
        <translation>生成</translation>
    </message>
    <message>
        <source>A random 32-character key</source>
        <translation>随机生成的 32 字符密钥</translation>
    </message>
    <message>
        <source>File: %1</source>
        <translation>文件：%1</translation>
    </message>
    <message>
        <source>It did not exist and was created from .env.example.</source>
        <translation>该文件原先不存在，已根据 .env.example 创建。</translation>
    </message>
    <message>
        <source>Lines the launcher cannot read (kept as they are):</source>
        <translation>启动器无法读取的行（保持原样）：</translation>
    </message>
    <message>
        <source>To fix before writing:</source>
        <translation>写入前需要修正：</translation>
    </message>
    <message>
        <source>Warnings:</source>
        <translation>警告：</translation>
    </message>
    <message>
        <source>Some fields are not valid.</source>
        <translation>部分字段无效。</translation>
    </message>
    <message>
        <source>Cannot write .env</source>
        <translation>无法写入 .env</translation>
    </message>
</context>
</TS>
