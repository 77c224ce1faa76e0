<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="uz">
<context>
    <name>ConversationStore</name>
    <message>
        <source>%1: cannot be read</source>
        <translation>%1: oʻqib boʻlmaydi</translation>
    </message>
    <message>
        <source>%1: not valid JSON (%2)</source>
        <translation>%1: yaroqli JSON emas (%2)</translation>
    </message>
    <message>
        <source>%1: not a conversation file</source>
        <translation>%1: suhbat fayli emas</translation>
    </message>
</context>
<context>
    <name>EngineSettings</name>
    <message>
        <source>the .env file %1</source>
        <translation>.env fayli %1</translation>
    </message>
    <message>
        <source>%1 &apos;%2&apos; (from %3) is not usable: %4</source>
        <translation>%1 &apos;%2&apos; (manba: %3) ishlatib boʻlmaydi: %4</translation>
    </message>
    <message>
        <source>give a whole number from %1 to %2.</source>
        <translation>%1 dan %2 gacha butun son kiriting.</translation>
    </message>
    <message>
        <source>give the share of the GPU&apos;s memory to use, above 0 and at most 1 (the recipe&apos;s 0.87).</source>
        <translation>GPU xotirasining ishlatiladigan ulushini kiriting: 0 dan katta, 1 dan oshmasin (retseptdagi qiymat 0.87).</translation>
    </message>
    <message>
        <source>GLM-5.3-Flash&apos;s sparse MLA kernels read the packed fp8 cache (fp8_ds_mla); give fp8, or fp32 for the exact reference mode.</source>
        <translation>GLM-5.3-Flash ning siyrak MLA yadrolari faqat qadoqlangan fp8 keshni (fp8_ds_mla) oʻqiydi; fp8 ni yoki aniq maʼlumotnoma rejimi uchun fp32 ni kiriting.</translation>
    </message>
    <message>
        <source>give fp8 (the recipe&apos;s) or fp32.</source>
        <translation>fp8 (retseptdagi) yoki fp32 ni kiriting.</translation>
    </message>
    <message>
        <source>give auto, cpu or cuda.</source>
        <translation>auto, cpu yoki cuda ni kiriting.</translation>
    </message>
</context>
<context>
    <name>EnvSchema</name>
    <message>
        <source>NCCL cannot use the 10.0.0.x loopback aliases: its traffic is pinned to the CX7 interfaces and RDMA devices on the Fabric page, and wrong pins hang initialisation (ncclCommInitRank) instead of failing.</source>
        <translation>NCCL 10.0.0.x loopback taxalluslaridan foydalana olmaydi: uning trafigi «CX7 tarmogʻi» sahifasidagi CX7 interfeyslari va RDMA qurilmalariga bogʻlab qoʻyilgan, notoʻgʻri bogʻlashlar esa initsializatsiyani (ncclCommInitRank) xato bilan tugatish oʻrniga qotirib qoʻyadi.</translation>
    </message>
    <message>
        <source>Model folder</source>
        <translation>Model papkasi</translation>
    </message>
    <message>
        <source>The checkpoint folder: config.json, the *.safetensors shards and tokenizer.json. The production model is Mia-AiLab/GLM-5.3-Flash-EXL3-TR3-4bpw (120 shards, about 164 GiB).</source>
        <translation>Checkpoint papkasi: config.json, *.safetensors boʻlaklari va tokenizer.json. Ishchi (production) muhitdagi model — Mia-AiLab/GLM-5.3-Flash-EXL3-TR3-4bpw (120 ta boʻlak, taxminan 164 GiB).</translation>
    </message>
    <message>
        <source>Head address</source>
        <translation>Bosh tugun manzili</translation>
    </message>
    <message>
        <source>This machine: rank 0, the scheduler, the API and the NCCL master. </source>
        <translation>Shu mashina: rank 0, rejalashtiruvchi (scheduler), API va NCCL master. </translation>
    </message>
    <message>
        <source>Worker address</source>
        <translation>Ishchi tugun manzili</translation>
    </message>
    <message>
        <source>The second Spark (rank 1), reached over SSH. It must differ from the head address.</source>
        <translation>Ikkinchi Spark (rank 1), unga SSH orqali ulaniladi. Uning manzili bosh tugun manzilidan farq qilishi kerak.</translation>
    </message>
    <message>
        <source>Worker SSH user</source>
        <translation>Ishchi tugun SSH foydalanuvchisi</translation>
    </message>
    <message>
        <source>The account on the worker, when it differs from yours here. Passwordless SSH from the head to the worker is required. Empty: the same user name.</source>
        <translation>Ishchi tugundagi hisob, agar u bu yerdagi hisobingizdan farq qilsa. Bosh tugundan ishchi tugunga parolsiz SSH kirish talab qilinadi. Boʻsh qoldirilsa: xuddi shu foydalanuvchi nomi.</translation>
    </message>
    <message>
        <source>Worker home</source>
        <translation>Ishchi tugun uy katalogi</translation>
    </message>
    <message>
        <source>Home directory (and Hugging Face cache location) on the worker, when it differs. An absolute path; empty: the same as here.</source>
        <translation>Ishchi tugundagi uy katalogi (va Hugging Face keshining joylashuvi), agar u farq qilsa. Mutlaq yoʻl; boʻsh qoldirilsa: bu yerdagi bilan bir xil.</translation>
    </message>
    <message>
        <source>API port</source>
        <translation>API porti</translation>
    </message>
    <message>
        <source>Port of the OpenAI-compatible API on the head node (base URL http://HEAD:PORT/v1).</source>
        <translation>Bosh tugundagi OpenAI bilan mos API porti (asosiy URL http://HEAD:PORT/v1).</translation>
    </message>
    <message>
        <source>API key</source>
        <translation>API kaliti</translation>
    </message>
    <message>
        <source>Bearer key that API clients must send. Without one the API has no authentication: the recipe warns to always set it in production.</source>
        <translation>API mijozlari yuborishi shart boʻlgan Bearer kaliti. Kalitsiz API da autentifikatsiya boʻlmaydi: joylashtirish retsepti ishchi (production) muhitda uni har doim oʻrnatish kerakligi haqida ogohlantiradi.</translation>
    </message>
    <message>
        <source>Head CX7 interface</source>
        <translation>Bosh tugun CX7 interfeysi</translation>
    </message>
    <message>
        <source>Network interface of the CX7 link on the head (see `ip -br link`). </source>
        <translation>Bosh tugundagi CX7 ulanishining tarmoq interfeysi (qarang: `ip -br link`). </translation>
    </message>
    <message>
        <source>Worker CX7 interface</source>
        <translation>Ishchi tugun CX7 interfeysi</translation>
    </message>
    <message>
        <source>Network interface of the CX7 link on the worker. Keep the documented pins unless your cabling differs.</source>
        <translation>Ishchi tugundagi CX7 ulanishining tarmoq interfeysi. Kabellaringiz boshqacha ulanmagan boʻlsa, hujjatlarda koʻrsatilgan bogʻlashlarni oʻzgartirmang.</translation>
    </message>
    <message>
        <source>Head RDMA devices</source>
        <translation>Bosh tugun RDMA qurilmalari</translation>
    </message>
    <message>
        <source>RDMA (HCA) devices of the CX7 link on the head, comma-separated (see `ibdev2netdev`). Wrong devices hang NCCL initialisation.</source>
        <translation>Bosh tugundagi CX7 ulanishining RDMA (HCA) qurilmalari, vergul bilan ajratilgan (qarang: `ibdev2netdev`). Notoʻgʻri qurilmalar NCCL initsializatsiyasini qotirib qoʻyadi.</translation>
    </message>
    <message>
        <source>Worker RDMA devices</source>
        <translation>Ishchi tugun RDMA qurilmalari</translation>
    </message>
    <message>
        <source>RDMA devices of the CX7 link on the worker, comma-separated.</source>
        <translation>Ishchi tugundagi CX7 ulanishining RDMA qurilmalari, vergul bilan ajratilgan.</translation>
    </message>
    <message>
        <source>KV cache type</source>
        <translation>KV kesh turi</translation>
    </message>
    <message>
        <source>Storage of the target model&apos;s KV cache. The sparse MLA kernels take packed fp8_ds_mla only, so the recipe keeps fp8.</source>
        <translation>Asosiy (target) modelning KV keshini saqlash formati. Siyrak MLA yadrolari faqat zichlangan fp8_ds_mla ni qabul qiladi, shuning uchun joylashtirish retsepti fp8 ni qoldiradi.</translation>
    </message>
    <message>
        <source>MoE backend</source>
        <translation>MoE backend</translation>
    </message>
    <message>
        <source>How routed experts run. EXL3 weights need their own packed-expert path.</source>
        <translation>Yoʻnaltiriladigan ekspertlar qanday bajarilishi. EXL3 vaznlari uchun ularning oʻz zichlangan ekspertlar (packed-expert) yoʻli kerak.</translation>
    </message>
    <message>
        <source>Draft attention</source>
        <translation>Qoralama attention</translation>
    </message>
    <message>
        <source>Attention backend of the speculative draft model (used once speculative decoding is available). Left to the automatic choice, FLASH_ATTN.</source>
        <translation>Spekulyativ qoralama modelning attention backendi (spekulyativ dekodlash mavjud boʻlgach ishlatiladi). Avtomatik tanlovga qoldiriladi, yaʼni FLASH_ATTN.</translation>
    </message>
    <message>
        <source>fp8 (packed fp8_ds_mla)</source>
        <translation>fp8 (zichlangan fp8_ds_mla)</translation>
    </message>
    <message>
        <source>bf16</source>
        <translation>bf16</translation>
    </message>
    <message>
        <source>Forbidden: there is no sparse MLA kernel for a BF16 KV cache.</source>
        <translation>Taqiqlangan: BF16 KV kesh uchun siyrak MLA yadrosi yoʻq.</translation>
    </message>
    <message>
        <source>nvfp4</source>
        <translation>nvfp4</translation>
    </message>
    <message>
        <source>Forbidden: the NVFP4 KV kernels are for dense MHA, not sparse MLA.</source>
        <translation>Taqiqlangan: NVFP4 KV yadrolari siyrak MLA uchun emas, zich MHA uchun moʻljallangan.</translation>
    </message>
    <message>
        <source>EXL3 packed experts</source>
        <translation>EXL3 zichlangan ekspertlari</translation>
    </message>
    <message>
        <source>marlin</source>
        <translation>marlin</translation>
    </message>
    <message>
        <source>Forbidden: this deployment uses EXL3 weights and their own packed-expert method; --moe-backend marlin is not allowed.</source>
        <translation>Taqiqlangan: bu joylashtirish EXL3 vaznlari va ularning oʻz zichlangan ekspertlar (packed-expert) usulidan foydalanadi; --moe-backend marlin ga ruxsat berilmaydi.</translation>
    </message>
    <message>
        <source>automatic (FLASH_ATTN)</source>
        <translation>avtomatik (FLASH_ATTN)</translation>
    </message>
    <message>
        <source>TRITON_ATTN</source>
        <translation>TRITON_ATTN</translation>
    </message>
    <message>
        <source>Forbidden: TRITON_ATTN makes attention inside the draft block causal; acceptance collapsed and speed fell from 61.7 to about 29 tok/s.</source>
        <translation>Taqiqlangan: TRITON_ATTN qoralama bloki ichidagi attentionni kauzal qiladi; qabul qilinish darajasi keskin qulab tushdi va tezlik 61.7 dan taxminan 29 tok/s gacha pasaydi.</translation>
    </message>
    <message>
        <source>Remove the spaces around the value.</source>
        <translation>Qiymat atrofidagi boʻsh joylarni olib tashlang.</translation>
    </message>
    <message>
        <source>A port is a number from 1 to 65535.</source>
        <translation>Port — 1 dan 65535 gacha boʻlgan son.</translation>
    </message>
    <message>
        <source>Ports below 1024 need administrator rights.</source>
        <translation>1024 dan kichik portlar uchun administrator huquqlari kerak.</translation>
    </message>
    <message>
        <source>Not a valid user name (lower-case letters, digits, &apos;_&apos; and &apos;-&apos;).</source>
        <translation>Yaroqli foydalanuvchi nomi emas (kichik harflar, raqamlar, &apos;_&apos; va &apos;-&apos;).</translation>
    </message>
    <message>
        <source>Give an absolute path (starting with /).</source>
        <translation>Mutlaq yoʻlni kiriting (/ bilan boshlanadigan).</translation>
    </message>
    <message>
        <source>Spaces in the path: make sure the worker&apos;s scripts quote it.</source>
        <translation>Yoʻlda boʻsh joylar bor: ishchi tugundagi skriptlar uni qoʻshtirnoq ichiga olishiga ishonch hosil qiling.</translation>
    </message>
    <message>
        <source>No API key: anyone who can reach the port can use the API.</source>
        <translation>API kaliti yoʻq: portga ulana oladigan har kim API dan foydalana oladi.</translation>
    </message>
    <message>
        <source>The key cannot contain spaces.</source>
        <translation>Kalitda boʻsh joy boʻlishi mumkin emas.</translation>
    </message>
    <message>
        <source>A short key is easy to guess; use 12 characters or more.</source>
        <translation>Qisqa kalitni topish oson; 12 yoki undan ortiq belgidan foydalaning.</translation>
    </message>
    <message>
        <source>Unknown value &apos;%1&apos;.</source>
        <translation>Nomaʼlum qiymat: &apos;%1&apos;.</translation>
    </message>
    <message>
        <source>No model folder yet: the Server page will ask for one.</source>
        <translation>Model papkasi hali koʻrsatilmagan: uni «Server» sahifasi soʻraydi.</translation>
    </message>
    <message>
        <source>Give an absolute path.</source>
        <translation>Mutlaq yoʻlni kiriting.</translation>
    </message>
    <message>
        <source>This folder does not exist.</source>
        <translation>Bu papka mavjud emas.</translation>
    </message>
    <message>
        <source>This is a file, not a folder.</source>
        <translation>Bu papka emas, fayl.</translation>
    </message>
    <message>
        <source>No config.json in this folder: it is not a checkpoint.</source>
        <translation>Bu papkada config.json yoʻq: bu checkpoint emas.</translation>
    </message>
    <message>
        <source>No tokenizer.json: the model can run, but not chat.</source>
        <translation>tokenizer.json yoʻq: model ishlay oladi, lekin suhbatlasha olmaydi.</translation>
    </message>
    <message>
        <source>An IPv4 address looks like 10.0.0.1 (four numbers from 0 to 255).</source>
        <translation>IPv4 manzil 10.0.0.1 koʻrinishida boʻladi (0 dan 255 gacha boʻlgan toʻrtta son).</translation>
    </message>
    <message>
        <source>A loopback address (127.x) cannot be reached from the other node.</source>
        <translation>Loopback manzilga (127.x) boshqa tugundan ulanib boʻlmaydi.</translation>
    </message>
    <message>
        <source>Not a host address.</source>
        <translation>Xost manzili emas.</translation>
    </message>
    <message>
        <source>The head and worker addresses must differ.</source>
        <translation>Bosh tugun va ishchi tugun manzillari farq qilishi kerak.</translation>
    </message>
    <message>
        <source>Needed for the two-node setup only.</source>
        <translation>Faqat ikki tugunli sozlama uchun kerak.</translation>
    </message>
    <message>
        <source>&apos;%1&apos; is an address alias; NCCL needs the interface itself (without &apos;:&apos;).</source>
        <translation>&apos;%1&apos; — manzil taxallusi; NCCL ga interfeysning oʻzi kerak (&apos;:&apos; belgisisiz).</translation>
    </message>
    <message>
        <source>Not an interface name (1–15 letters, digits, &apos;_&apos;, &apos;.&apos;, &apos;-&apos;).</source>
        <translation>Interfeys nomi emas (1–15 ta harf, raqam, &apos;_&apos;, &apos;.&apos;, &apos;-&apos;).</translation>
    </message>
    <message>
        <source>The loopback interface: NCCL cannot use the loopback aliases.</source>
        <translation>Bu loopback interfeysi: NCCL loopback taxalluslaridan foydalana olmaydi.</translation>
    </message>
    <message>
        <source>This looks like a virtual interface, not the CX7 port.</source>
        <translation>Bu CX7 portiga emas, virtual interfeysga oʻxshaydi.</translation>
    </message>
    <message>
        <source>&apos;%1&apos; is not an RDMA device name (like mlx5_0 or mlx5_0:1).</source>
        <translation>&apos;%1&apos; RDMA qurilmasi nomi emas (masalan, mlx5_0 yoki mlx5_0:1).</translation>
    </message>
    <message>
        <source>&apos;%1&apos; is listed twice.</source>
        <translation>&apos;%1&apos; ikki marta koʻrsatilgan.</translation>
    </message>
    <message>
        <source>fp8_ds_mla (the same as fp8)</source>
        <translation>fp8_ds_mla (fp8 bilan bir xil)</translation>
    </message>
    <message>
        <source>fp32 (exact reference)</source>
        <translation>fp32 (aniq maʼlumotnoma)</translation>
    </message>
</context>
<context>
    <name>EnvStore</name>
    <message>
        <source>The bundled .env.example is missing from this build.</source>
        <translation>Bu yigʻmada birga keladigan .env.example fayli yoʻq.</translation>
    </message>
    <message>
        <source>line %1: %2</source>
        <translation>%1-qator: %2</translation>
    </message>
    <message>
        <source>command line</source>
        <translation>buyruq qatori</translation>
    </message>
    <message>
        <source>environment</source>
        <translation>muhit oʻzgaruvchilari</translation>
    </message>
    <message>
        <source>the .env file %1</source>
        <translation>.env fayli %1</translation>
    </message>
    <message>
        <source>PORT &apos;%1&apos; (from %2) is not usable: %3</source>
        <translation>PORT &apos;%1&apos; (manba: %2) ishlatib boʻlmaydi: %3</translation>
    </message>
</context>
<context>
    <name>QObject</name>
    <message>
        <source>Deployment settings</source>
        <translation>Joylashtirish sozlamalari</translation>
    </message>
    <message>
        <source>The API is not started. Correct PORT on the Setup page, or choose a port on the Server page and turn the API on there.</source>
        <translation>API ishga tushirilmadi. «Sozlash» sahifasida PORT ni tuzating yoki «Server» sahifasida port tanlab, API ni oʻsha yerda yoqing.</translation>
    </message>
    <message>
        <source>The API is not started. Correct or unset the PORT environment variable, or choose a port on the Server page and turn the API on there.</source>
        <translation>API ishga tushirilmadi. PORT muhit oʻzgaruvchisini tuzating yoki olib tashlang, yoki «Server» sahifasida port tanlab, API ni oʻsha yerda yoqing.</translation>
    </message>
    <message>
        <source>Until this is corrected the model is not loaded: correct it in the .env file and load the model on the Server page (a value from the environment or --set needs a restart). A bad MAX_NUM_SEQS or TS_KV_BUDGET_MIB only leaves the Server page&apos;s value in use; a bad TS_MAX_CONCURRENT_REQUESTS keeps the API off.</source>
        <translation>Bu tuzatilmaguncha model yuklanmaydi: uni .env faylida tuzating va modelni «Server» sahifasida yuklang (muhit oʻzgaruvchisidan yoki --set dan kelgan qiymat uchun qayta ishga tushirish kerak). Notoʻgʻri MAX_NUM_SEQS yoki TS_KV_BUDGET_MIB faqat «Server» sahifasidagi qiymatni qoldiradi; notoʻgʻri TS_MAX_CONCURRENT_REQUESTS API ni oʻchiq qoldiradi.</translation>
    </message>
</context>
<context>
    <name>ts::ui::ChatMessageWidget</name>
    <message>
        <source>You</source>
        <translation>Siz</translation>
    </message>
    <message>
        <source>Assistant</source>
        <translation>Yordamchi</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>Nusxalash</translation>
    </message>
    <message>
        <source>Copy this message as Markdown</source>
        <translation>Bu xabarni Markdown sifatida nusxalash</translation>
    </message>
    <message>
        <source>Edit</source>
        <translation>Tahrirlash</translation>
    </message>
    <message>
        <source>Edit this message and send it again (the answers after it are replaced)</source>
        <translation>Bu xabarni tahrirlab, qayta yuborish (undan keyingi javoblar almashtiriladi)</translation>
    </message>
    <message>
        <source>Reasoning</source>
        <translation>Mulohaza</translation>
    </message>
    <message>
        <source>Copy code</source>
        <translation>Kodni nusxalash</translation>
    </message>
    <message>
        <source>Copy code %1</source>
        <translation>%1-kodni nusxalash</translation>
    </message>
</context>
<context>
    <name>ts::ui::ChatPage</name>
    <message>
        <source>New chat</source>
        <translation>Yangi suhbat</translation>
    </message>
    <message>
        <source>Start a new conversation (Ctrl+N)</source>
        <translation>Yangi suhbat boshlash (Ctrl+N)</translation>
    </message>
    <message>
        <source>Delete</source>
        <translation>Oʻchirish</translation>
    </message>
    <message>
        <source>Message (Ctrl+Enter to send)</source>
        <translation>Xabar (yuborish uchun Ctrl+Enter)</translation>
    </message>
    <message>
        <source>Send</source>
        <translation>Yuborish</translation>
    </message>
    <message>
        <source>Send (Ctrl+Enter)</source>
        <translation>Yuborish (Ctrl+Enter)</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>Toʻxtatish</translation>
    </message>
    <message>
        <source>Stop generating (Esc)</source>
        <translation>Javob yaratishni toʻxtatish (Esc)</translation>
    </message>
    <message>
        <source>Regenerate</source>
        <translation>Qayta yaratish</translation>
    </message>
    <message>
        <source>Answer the last message again (Ctrl+R)</source>
        <translation>Oxirgi xabarga qayta javob berish (Ctrl+R)</translation>
    </message>
    <message>
        <source>%1 — a random-weight test checkpoint: answers are noise.</source>
        <translation>%1 — tasodifiy vaznli test checkpointi: javoblar maʼnosiz shovqin.</translation>
    </message>
    <message>
        <source>Model: %1</source>
        <translation>Model: %1</translation>
    </message>
    <message>
        <source>%1 has no tokenizer or chat template: it cannot chat.</source>
        <translation>%1 modelida tokenizer ham, suhbat shabloni ham yoʻq: u suhbatlasha olmaydi.</translation>
    </message>
    <message>
        <source>Load a model on the Server page to chat.</source>
        <translation>Suhbatlashish uchun «Server» sahifasida modelni yuklang.</translation>
    </message>
    <message>
        <source>Some saved conversations could not be read: %1</source>
        <translation>Saqlangan baʼzi suhbatlarni oʻqib boʻlmadi: %1</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>Sozlamalar</translation>
    </message>
    <message>
        <source>System prompt (optional)</source>
        <translation>Tizim prompti (ixtiyoriy)</translation>
    </message>
    <message>
        <source>System</source>
        <translation>Tizim</translation>
    </message>
    <message>
        <source>Thinking</source>
        <translation>Fikrlash</translation>
    </message>
    <message>
        <source>Let the model reason before answering (shown collapsed above the answer).</source>
        <translation>Model javob berishdan oldin mulohaza yuritsin (javob ustida yigʻilgan holda koʻrsatiladi).</translation>
    </message>
    <message>
        <source>0 = greedy (always the most likely token)</source>
        <translation>0 = greedy (har doim eng ehtimolli token)</translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation>Harorat</translation>
    </message>
    <message>
        <source>Top-p</source>
        <translation>Top-p</translation>
    </message>
    <message>
        <source>off</source>
        <translation>oʻchiq</translation>
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
        <translation>Takrorlash jarimasi</translation>
    </message>
    <message>
        <source>Max tokens</source>
        <translation>Maksimal tokenlar</translation>
    </message>
    <message>
        <source>random</source>
        <translation>tasodifiy</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>Seed (urugʻ)</translation>
    </message>
    <message>
        <source>waiting…</source>
        <translation>kutilmoqda…</translation>
    </message>
    <message numerus="yes">
        <source>%n token(s)…</source>
        <translation>
            <numerusform>%n ta token…</numerusform>
            <numerusform>%n ta token…</numerusform>
        </translation>
    </message>
    <message>
        <source>Error: %1</source>
        <translation>Xato: %1</translation>
    </message>
    <message>
        <source> · max tokens reached</source>
        <translation> · maksimal tokenlar soniga yetildi</translation>
    </message>
    <message>
        <source> · stopped</source>
        <translation> · toʻxtatildi</translation>
    </message>
    <message>
        <source>%1 tok/s · TTFT %2 ms · %3 tokens%4</source>
        <translation>%1 tok/s · TTFT %2 ms · %3 ta token%4</translation>
    </message>
    <message>
        <source>Could not save the conversation: %1</source>
        <translation>Suhbatni saqlab boʻlmadi: %1</translation>
    </message>
    <message>
        <source>(untitled)</source>
        <translation>(nomsiz)</translation>
    </message>
</context>
<context>
    <name>ts::ui::DashboardPage</name>
    <message>
        <source>KV cache</source>
        <translation>KV kesh</translation>
    </message>
    <message>
        <source>blocks in use</source>
        <translation>band bloklar</translation>
    </message>
    <message>
        <source>Throughput</source>
        <translation>Oʻtkazuvchanlik</translation>
    </message>
    <message>
        <source>tokens/s</source>
        <translation>token/s</translation>
    </message>
    <message>
        <source>prompt</source>
        <translation>prompt</translation>
    </message>
    <message>
        <source>generation</source>
        <translation>generatsiya</translation>
    </message>
    <message>
        <source>Requests</source>
        <translation>Soʻrovlar</translation>
    </message>
    <message>
        <source>requests</source>
        <translation>soʻrovlar</translation>
    </message>
    <message>
        <source>running</source>
        <translation>bajarilmoqda</translation>
    </message>
    <message>
        <source>waiting</source>
        <translation>kutmoqda</translation>
    </message>
    <message>
        <source>Time to first token</source>
        <translation>Birinchi tokengacha vaqt</translation>
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
        <translation>soniya</translation>
    </message>
    <message>
        <source>&lt;b&gt;KV cache&lt;/b&gt; %1 % · %2 / %3 blocks · %4 / %5 tokens</source>
        <translation>&lt;b&gt;KV kesh&lt;/b&gt; %1 % · %2 / %3 blok · %4 / %5 token</translation>
    </message>
    <message>
        <source>&lt;b&gt;Throughput&lt;/b&gt; prompt %1 tok/s · generation %2 tok/s · %3 / %4 tokens in total</source>
        <translation>&lt;b&gt;Oʻtkazuvchanlik&lt;/b&gt; prompt %1 tok/s · generatsiya %2 tok/s · jami %3 / %4 token</translation>
    </message>
    <message>
        <source>&lt;b&gt;Requests&lt;/b&gt; %1 running · %2 waiting · %3 finished</source>
        <translation>&lt;b&gt;Soʻrovlar&lt;/b&gt; %1 ta bajarilmoqda · %2 ta kutmoqda · %3 ta tugallangan</translation>
    </message>
    <message>
        <source>&lt;b&gt;Time to first token&lt;/b&gt; mean %1 ms</source>
        <translation>&lt;b&gt;Birinchi tokengacha vaqt&lt;/b&gt; oʻrtacha %1 ms</translation>
    </message>
    <message>
        <source> · %1 decode steps from CUDA graphs</source>
        <translation> · CUDA graflaridan %1 ta dekodlash qadami</translation>
    </message>
    <message>
        <source> · system memory %1 GiB available of %2 (shared with the GPU)</source>
        <translation> · tizim xotirasi: %2 dan %1 GiB mavjud (GPU bilan umumiy)</translation>
    </message>
    <message>
        <source> &lt;span style=&quot;color:#c62828&quot;&gt;&lt;b&gt;low&lt;/b&gt;: close other programs; a GB10 can reset when its memory runs out&lt;/span&gt;</source>
        <translation> &lt;span style=&quot;color:#c62828&quot;&gt;&lt;b&gt;kam&lt;/b&gt;: boshqa dasturlarni yoping; xotirasi tugaganda GB10 qayta ishga tushib ketishi mumkin&lt;/span&gt;</translation>
    </message>
    <message>
        <source> · GPU memory %1 GiB free of %2</source>
        <translation> · GPU xotirasi: %2 dan %1 GiB boʻsh</translation>
    </message>
</context>
<context>
    <name>ts::ui::EngineController</name>
    <message>
        <source>Loading %1</source>
        <translation>%1 yuklanmoqda</translation>
    </message>
    <message>
        <source>Reading config.json</source>
        <translation>config.json oʻqilmoqda</translation>
    </message>
    <message>
        <source>Mapping and checking the weights</source>
        <translation>Vaznlar xotiraga akslantirilmoqda va tekshirilmoqda</translation>
    </message>
    <message>
        <source>Loading the tokenizer</source>
        <translation>Tokenizer yuklanmoqda</translation>
    </message>
    <message>
        <source>Loading the chat template</source>
        <translation>Suhbat shabloni yuklanmoqda</translation>
    </message>
    <message>
        <source>No chat template in %1: the chat playground is unavailable</source>
        <translation>%1 ichida suhbat shabloni yoʻq: suhbat sinov maydonchasi mavjud emas</translation>
    </message>
    <message>
        <source>No tokenizer.json in %1: the chat playground is unavailable</source>
        <translation>%1 ichida tokenizer.json yoʻq: suhbat sinov maydonchasi mavjud emas</translation>
    </message>
    <message>
        <source>Sizing the KV pool</source>
        <translation>KV pool hajmi aniqlanmoqda</translation>
    </message>
    <message>
        <source>Load failed: %1</source>
        <translation>Yuklab boʻlmadi: %1</translation>
    </message>
    <message>
        <source>Ready</source>
        <translation>Tayyor</translation>
    </message>
    <message>
        <source>Loaded %1: %2 layers, vocabulary %3, KV pool %4 tokens</source>
        <translation>%1 yuklandi: %2 ta qatlam, lugʻat %3, KV pool %4 token</translation>
    </message>
    <message>
        <source>Model unloaded</source>
        <translation>Model boʻshatildi</translation>
    </message>
    <message>
        <source>No model is loaded.</source>
        <translation>Hech qanday model yuklanmagan.</translation>
    </message>
    <message>
        <source>This model has no tokenizer or chat template, so it cannot chat.</source>
        <translation>Bu modelda tokenizer ham, suhbat shabloni ham yoʻq, shuning uchun u suhbatlasha olmaydi.</translation>
    </message>
    <message>
        <source>Chat request %1: %2 prompt tokens</source>
        <translation>Suhbat soʻrovi %1: %2 ta prompt tokeni</translation>
    </message>
    <message>
        <source>Chat request refused: %1</source>
        <translation>Suhbat soʻrovi rad etildi: %1</translation>
    </message>
    <message>
        <source>This build has no HTTP server.</source>
        <translation>Bu yigʻmada HTTP server yoʻq.</translation>
    </message>
    <message>
        <source>Load a model first.</source>
        <translation>Avval modelni yuklang.</translation>
    </message>
    <message>
        <source>HTTP server listening: %1</source>
        <translation>HTTP server tinglamoqda: %1</translation>
    </message>
    <message>
        <source>HTTP server failed to start: %1</source>
        <translation>HTTP serverni ishga tushirib boʻlmadi: %1</translation>
    </message>
    <message>
        <source>HTTP server stopped</source>
        <translation>HTTP server toʻxtatildi</translation>
    </message>
    <message>
        <source>Backend: %1</source>
        <translation>Backend: %1</translation>
    </message>
    <message>
        <source>GPU self-test (every kernel against the CPU reference)</source>
        <translation>GPU oʻz-oʻzini tekshirish (har bir yadro CPU dagi etalon bilan solishtiriladi)</translation>
    </message>
    <message>
        <source>GPU self-test skipped (SKIP_OVERLAY_VERIFY=1)</source>
        <translation>GPU oʻz-oʻzini tekshirish oʻtkazib yuborildi (SKIP_OVERLAY_VERIFY=1)</translation>
    </message>
    <message>
        <source>GPU self-test passed: %1 checks</source>
        <translation>GPU oʻz-oʻzini tekshirish muvaffaqiyatli: %1 ta tekshiruv</translation>
    </message>
    <message>
        <source>GPU memory: %1</source>
        <translation>GPU xotirasi: %1</translation>
    </message>
    <message>
        <source>Waiting for device memory</source>
        <translation>Qurilma xotirasi kutilmoqda</translation>
    </message>
    <message>
        <source>Loading the weights (%1 of %2)</source>
        <translation>Vaznlar yuklanmoqda (%2 dan %1)</translation>
    </message>
    <message>
        <source>Engine: up to %1 sequences at once, %2 tokens per step, %3 tokens per request at most, KV cache %4</source>
        <translation>Dvigatel: bir vaqtda %1 tagacha ketma-ketlik, har qadamda %2 token, har soʻrovga koʻpi bilan %3 token, KV kesh %4</translation>
    </message>
    <message>
        <source>The engine has stopped: %1. Nothing more runs on this GPU until TwinSpark is restarted; unload the model (the CPU backend still works).</source>
        <translation>Dvigatel toʻxtadi: %1. TwinSpark qayta ishga tushirilmaguncha bu GPU’da boshqa hech narsa ishlamaydi; modelni yuklab tashlang (CPU backend ishlashda davom etadi).</translation>
    </message>
    <message>
        <source>Mapping and checking the weights (layer %1 of %2)</source>
        <translation>Vaznlar xotiraga akslantirilmoqda va tekshirilmoqda (%2 qatlamdan %1-si)</translation>
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
        <translation>Server</translation>
    </message>
    <message>
        <source>Dashboard</source>
        <translation>Boshqaruv paneli</translation>
    </message>
    <message>
        <source>Chat</source>
        <translation>Suhbat</translation>
    </message>
    <message>
        <source>Setup</source>
        <translation>Sozlash</translation>
    </message>
    <message>
        <source>%1 (test checkpoint, random weights)</source>
        <translation>%1 (test checkpointi, tasodifiy vaznlar)</translation>
    </message>
    <message>
        <source>TwinSpark — %1</source>
        <translation>TwinSpark — %1</translation>
    </message>
    <message>
        <source>Load failed: %1</source>
        <translation>Yuklab boʻlmadi: %1</translation>
    </message>
    <message>
        <source>&amp;File</source>
        <translation>&amp;Fayl</translation>
    </message>
    <message>
        <source>&amp;Quit</source>
        <translation>&amp;Chiqish</translation>
    </message>
    <message>
        <source>&amp;View</source>
        <translation>&amp;Koʻrinish</translation>
    </message>
    <message>
        <source>&amp;Language</source>
        <translation>&amp;Til</translation>
    </message>
    <message>
        <source>The language changes when TwinSpark starts again.</source>
        <translation>Til TwinSpark qayta ishga tushganda oʻzgaradi.</translation>
    </message>
    <message>
        <source>&amp;Help</source>
        <translation>&amp;Yordam</translation>
    </message>
    <message>
        <source>&amp;About TwinSpark</source>
        <translation>TwinSpark &amp;haqida</translation>
    </message>
    <message>
        <source>About TwinSpark</source>
        <translation>TwinSpark haqida</translation>
    </message>
    <message>
        <source>TwinSpark %1 — GLM-5.3-Flash inference with an embedded engine and an OpenAI-compatible API.</source>
        <translation>TwinSpark %1 — ichki oʻrnatilgan dvigatel va OpenAI bilan mos API yordamida GLM-5.3-Flash inferensi.</translation>
    </message>
    <message>
        <source>No model</source>
        <translation>Model yoʻq</translation>
    </message>
    <message>
        <source>Loading…</source>
        <translation>Yuklanmoqda…</translation>
    </message>
    <message>
        <source>Ready</source>
        <translation>Tayyor</translation>
    </message>
    <message>
        <source>Unloading…</source>
        <translation>Boʻshatilmoqda…</translation>
    </message>
</context>
<context>
    <name>ts::ui::ServerPage</name>
    <message>
        <source>Engine: no model loaded</source>
        <translation>Dvigatel: model yuklanmagan</translation>
    </message>
    <message>
        <source>Log</source>
        <translation>Jurnal</translation>
    </message>
    <message>
        <source>Load failed: %1</source>
        <translation>Yuklab boʻlmadi: %1</translation>
    </message>
    <message>
        <source>No model loaded</source>
        <translation>Model yuklanmagan</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>Model</translation>
    </message>
    <message>
        <source>Browse…</source>
        <translation>Tanlash…</translation>
    </message>
    <message>
        <source>Model folder</source>
        <translation>Model papkasi</translation>
    </message>
    <message>
        <source>Folder</source>
        <translation>Papka</translation>
    </message>
    <message>
        <source> MiB</source>
        <translation> MiB</translation>
    </message>
    <message>
        <source>Memory for the KV pool and the per-request recurrent states.</source>
        <translation>KV pool va har bir soʻrovning rekurrent holatlari uchun xotira.</translation>
    </message>
    <message>
        <source>KV budget</source>
        <translation>KV byudjeti</translation>
    </message>
    <message>
        <source>Parallel generations (the recipe&apos;s MAX_NUM_SEQS is 4).</source>
        <translation>Parallel generatsiyalar soni (joylashtirish retseptidagi MAX_NUM_SEQS qiymati 4 ga teng).</translation>
    </message>
    <message>
        <source>Parallel requests</source>
        <translation>Parallel soʻrovlar</translation>
    </message>
    <message>
        <source>Load</source>
        <translation>Yuklash</translation>
    </message>
    <message>
        <source>Load the model (Ctrl+L)</source>
        <translation>Modelni yuklash (Ctrl+L)</translation>
    </message>
    <message>
        <source>Unload</source>
        <translation>Boʻshatish</translation>
    </message>
    <message>
        <source>This is a small generated test checkpoint with random weights: its answers are noise. It shows that the pipeline works, not what the model can do.</source>
        <translation>Bu tasodifiy vaznli, avtomatik yaratilgan kichik test checkpointi: uning javoblari maʼnosiz shovqin. U modelning imkoniyatlarini emas, balki konveyer ishlayotganini koʻrsatadi.</translation>
    </message>
    <message>
        <source>OpenAI API</source>
        <translation>OpenAI API</translation>
    </message>
    <message>
        <source>Serve the API</source>
        <translation>API xizmatini yoqish</translation>
    </message>
    <message>
        <source>This computer only (127.0.0.1)</source>
        <translation>Faqat shu kompyuter (127.0.0.1)</translation>
    </message>
    <message>
        <source>The network (0.0.0.0) — needs an API key</source>
        <translation>Tarmoq (0.0.0.0) — API kaliti kerak</translation>
    </message>
    <message>
        <source>Listen on</source>
        <translation>Tinglash manzili</translation>
    </message>
    <message>
        <source>any free port</source>
        <translation>istalgan boʻsh port</translation>
    </message>
    <message>
        <source>Port</source>
        <translation>Port</translation>
    </message>
    <message>
        <source>none (loopback only)</source>
        <translation>yoʻq (faqat loopback)</translation>
    </message>
    <message>
        <source>API key</source>
        <translation>API kaliti</translation>
    </message>
    <message>
        <source>Applies when the API is switched on.</source>
        <translation>API yoqilganda kuchga kiradi.</translation>
    </message>
    <message>
        <source>Off</source>
        <translation>Oʻchiq</translation>
    </message>
    <message>
        <source>Status</source>
        <translation>Holat</translation>
    </message>
    <message>
        <source>Base URL</source>
        <translation>Asosiy URL</translation>
    </message>
    <message>
        <source>Example</source>
        <translation>Misol</translation>
    </message>
    <message>
        <source>Copy curl</source>
        <translation>curl buyrugʻini nusxalash</translation>
    </message>
    <message>
        <source>Copy URL</source>
        <translation>URL ni nusxalash</translation>
    </message>
    <message>
        <source>This build has no HTTP server.</source>
        <translation>Bu yigʻmada HTTP server yoʻq.</translation>
    </message>
    <message>
        <source>Choose the model folder first.</source>
        <translation>Avval model papkasini tanlang.</translation>
    </message>
    <message>
        <source>Starting…</source>
        <translation>Ishga tushirilmoqda…</translation>
    </message>
    <message>
        <source>Loaded %1: %2 layers, vocabulary %3, KV pool %4 tokens%5</source>
        <translation>%1 yuklandi: %2 ta qatlam, lugʻat %3, KV pool %4 token%5</translation>
    </message>
    <message>
        <source> (no chat template: API completions by token ids only)</source>
        <translation> (suhbat shabloni yoʻq: API completion soʻrovlari faqat token ID lari bilan)</translation>
    </message>
    <message>
        <source>Listening on %1</source>
        <translation>Tinglanmoqda: %1</translation>
    </message>
    <message>
        <source>Not running: %1</source>
        <translation>Ishlamayapti: %1</translation>
    </message>
    <message>
        <source>Engine: %1 running, %2 waiting · KV %3 % · %4 tok/s generation</source>
        <translation>Dvigatel: %1 ta bajarilmoqda, %2 ta kutmoqda · KV %3 % · generatsiya %4 tok/s</translation>
    </message>
    <message>
        <source>Not loaded: %1</source>
        <translation>Yuklanmadi: %1</translation>
    </message>
    <message>
        <source>%1 This page&apos;s value is used.</source>
        <translation>%1 Ushbu sahifadagi qiymat ishlatiladi.</translation>
    </message>
    <message>
        <source>Not started: %1</source>
        <translation>Ishga tushirilmadi: %1</translation>
    </message>
    <message>
        <source>The .env file could not be read again (%1): its values as read before are used.</source>
        <translation>.env faylini qayta oʻqib boʻlmadi (%1): avval oʻqilgan qiymatlar ishlatiladi.</translation>
    </message>
    <message>
        <source>Not loaded: %1 Correct it in the .env file and load again (a value from the environment or --set needs a restart of the control center).</source>
        <translation>Yuklanmadi: %1 Uni .env faylida tuzatib, qayta yuklang (muhit oʻzgaruvchisidan yoki --set dan kelgan qiymat uchun boshqaruv markazini qayta ishga tushirish kerak).</translation>
    </message>
    <message>
        <source>Engine stopped: %1. Restart TwinSpark to use the GPU again.</source>
        <translation>Dvigatel toʻxtadi: %1. GPU’dan yana foydalanish uchun TwinSpark’ni qayta ishga tushiring.</translation>
    </message>
</context>
<context>
    <name>ts::ui::SetupPage</name>
    <message>
        <source>Open the setup wizard…</source>
        <translation>Sozlash ustasini ochish…</translation>
    </message>
    <message>
        <source>Deployment settings: %1</source>
        <translation>Joylashtirish sozlamalari: %1</translation>
    </message>
    <message>
        <source>(set)</source>
        <translation>(oʻrnatilgan)</translation>
    </message>
    <message>
        <source>from the %1</source>
        <translation>manba: %1</translation>
    </message>
    <message>
        <source>Lines the launcher cannot read:</source>
        <translation>Ishga tushirgich oʻqiy olmaydigan qatorlar:</translation>
    </message>
</context>
<context>
    <name>ts::ui::SetupWizard</name>
    <message>
        <source>TwinSpark setup</source>
        <translation>TwinSpark sozlash ustasi</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>Model</translation>
    </message>
    <message>
        <source>Where the checkpoint is.</source>
        <translation>Checkpoint qayerda joylashgan.</translation>
    </message>
    <message>
        <source>Nodes</source>
        <translation>Tugunlar</translation>
    </message>
    <message>
        <source>The two machines and how the head reaches the worker over SSH.</source>
        <translation>Ikki mashina va bosh tugun ishchi tugunga SSH orqali qanday ulanishi.</translation>
    </message>
    <message>
        <source>API</source>
        <translation>API</translation>
    </message>
    <message>
        <source>The OpenAI-compatible API served on the head node.</source>
        <translation>Bosh tugunda ishlaydigan OpenAI bilan mos API.</translation>
    </message>
    <message>
        <source>Fabric</source>
        <translation>CX7 tarmogʻi</translation>
    </message>
    <message>
        <source>The CX7 link between the nodes. Keep the documented pins unless your cabling differs.</source>
        <translation>Tugunlar orasidagi CX7 ulanishi. Kabellaringiz boshqacha ulanmagan boʻlsa, hujjatlarda koʻrsatilgan bogʻlashlarni oʻzgartirmang.</translation>
    </message>
    <message>
        <source>Runtime</source>
        <translation>Ishga tushirish</translation>
    </message>
    <message>
        <source>Settings the recipe fixes. Forbidden values are shown, and why, but cannot be chosen.</source>
        <translation>Joylashtirish retsepti belgilab qoʻygan sozlamalar. Taqiqlangan qiymatlar sababi bilan koʻrsatiladi, lekin ularni tanlab boʻlmaydi.</translation>
    </message>
    <message>
        <source>Write .env</source>
        <translation>.env ni yozish</translation>
    </message>
    <message>
        <source>Finish writes the file. Comments and settings this wizard does not know are kept.</source>
        <translation>Finish (Tugatish) tugmasi faylni yozadi. Izohlar va bu usta bilmaydigan sozlamalar saqlab qolinadi.</translation>
    </message>
    <message>
        <source>Set by the %1 to &apos;%2&apos;: that value wins at run time; this file keeps what you enter here.</source>
        <translation>%1 tomonidan &apos;%2&apos; qiymati berilgan: ishga tushirishda shu qiymat ustun turadi; bu fayl esa siz bu yerda kiritgan qiymatni saqlaydi.</translation>
    </message>
    <message>
        <source>%1 — not allowed</source>
        <translation>%1 — ruxsat etilmaydi</translation>
    </message>
    <message>
        <source>Browse…</source>
        <translation>Tanlash…</translation>
    </message>
    <message>
        <source>Model folder</source>
        <translation>Model papkasi</translation>
    </message>
    <message>
        <source>Generate</source>
        <translation>Yaratish</translation>
    </message>
    <message>
        <source>A random 32-character key</source>
        <translation>Tasodifiy 32 belgili kalit</translation>
    </message>
    <message>
        <source>File: %1</source>
        <translation>Fayl: %1</translation>
    </message>
    <message>
        <source>It did not exist and was created from .env.example.</source>
        <translation>U mavjud emas edi va .env.example asosida yaratildi.</translation>
    </message>
    <message>
        <source>Lines the launcher cannot read (kept as they are):</source>
        <translation>Ishga tushirgich oʻqiy olmaydigan qatorlar (oʻzgarishsiz saqlanadi):</translation>
    </message>
    <message>
        <source>To fix before writing:</source>
        <translation>Yozishdan oldin tuzatish kerak:</translation>
    </message>
    <message>
        <source>Warnings:</source>
        <translation>Ogohlantirishlar:</translation>
    </message>
    <message>
        <source>Some fields are not valid.</source>
        <translation>Baʼzi maydonlar yaroqsiz.</translation>
    </message>
    <message>
        <source>Cannot write .env</source>
        <translation>.env ni yozib boʻlmadi</translation>
    </message>
</context>
</TS>
