"""Dev sets for the compaction evals: long multi-session conversations + questions whose answers are
verbatim in the conversation. Written to ``OUT/<set>/<name>.jsonl`` (an OpenAI-format transcript) and
``<name>.qa.jsonl`` (``{"question": ..., "answer": ...}`` per line); :func:`evals.datasets.compaction_sets`
builds them on first use into ``evals/.cache/`` (nothing is committed).

Two sets, both deterministic:

* ``synthetic`` — **synthetic**, generated here from templates with a seed: two friends chat over ~25
  dated sessions (English and Chinese conversations); each session plants a few facts of the kinds people
  later ask about (names, places, dates, numbers, preferences, plans, plain events without cue words,
  lower-case details) among chit-chat distractors that also carry names, numbers and exclamations.
* ``madial`` — built from the public MADial-Bench data (MIT, :data:`MADIAL`), English
  and Chinese: per user, one session per memory (dated by the memory's time) in which the user tells the
  memory's event in the first person around one of the user's real dialogues with the assistant; the
  questions ask for the event's date and a content span of the event.

``synthetic-heldout`` and ``madial-heldout`` are the same constructions drawn again (other seeds; for
MADial, each memory told inside another of the user's dialogues, at other places, with other answer spans):
a change tuned on the first two counts only if it holds on these. ``*-heldout2`` is a third draw, built
when a constant had been compared on both earlier draws and needed data it had not been chosen on;
``*-heldout3`` a fourth, built to check a change chosen on the first three (the clause trimming of stop 24),
``*-heldout4`` a fifth, built to check the assistant weight of stop 25 (chosen on the first three).

Not built from LoCoMo (the held-out benchmark). Run: python -m evals.datasets.compaction [OUT]
"""

from __future__ import annotations

import json
import random
import re
import sys
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

MADIAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "madial-bench" / "data"  # ../shared


@dataclass
class Conversation:
    name: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    qa: list[dict[str, str]] = field(default_factory=list)

    def say(self, role: str, speaker: str, text: str) -> None:
        self.messages.append({"role": role, "content": f"{speaker}: {text}"})

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(m, ensure_ascii=False) for m in self.messages]
        (folder / f"{self.name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        text = "\n".join(m["content"] for m in self.messages).lower()
        qa = [q for q in self.qa if " ".join(q["answer"].lower().split()) in " ".join(text.split())]
        qlines = [json.dumps(q, ensure_ascii=False) for q in qa]
        (folder / f"{self.name}.qa.jsonl").write_text("\n".join(qlines) + "\n", encoding="utf-8")


# --- synthetic ----------------------------------------------------------------------------------

# Each fact: (statement template, question template, answer slot). Slots are filled from POOLS; {who}
# is the speaker's name, {other} the listener's.
EN_POOLS: dict[str, list[str]] = {
    "pet": ["Luna", "Biscuit", "Oscar", "Pepper", "Mochi", "Rocco", "Hazel", "Ziggy", "Nala", "Waffles"],
    "animal": ["puppy", "kitten", "rabbit", "parrot", "golden retriever", "tabby cat"],
    "person": ["Priya", "Tomasz", "Elena", "Marcus", "Ingrid", "Diego", "Hannah", "Kofi", "Sofia", "Ravi"],
    "rel": ["sister", "brother", "cousin", "neighbour", "coworker", "roommate", "aunt", "best friend"],
    "city": ["Lisbon", "Kyoto", "Denver", "Edinburgh", "Tallinn", "Montreal", "Oaxaca", "Hobart", "Porto"],
    "place": ["Lake Tahoe", "Zion National Park", "the Cliffs of Moher", "Mount Rainier", "Big Sur"],
    "company": ["Brightwave", "Northwind Labs", "Kestrel Health", "Oakline", "Fernhill Studios"],
    "job": ["product designer", "nurse", "data analyst", "sous chef", "physio", "teacher", "architect"],
    "hobby": ["pottery", "bouldering", "birdwatching", "salsa dancing", "sourdough baking", "chess"],
    "band": ["Fleetwood Mac", "Khruangbin", "The National", "Radiohead", "Bon Iver", "Arctic Monkeys"],
    "book": ["Piranesi", "The Overstory", "Circe", "Project Hail Mary", "Educated", "Pachinko"],
    "food": ["pad thai", "shakshuka", "lasagna", "ramen", "fish tacos", "mushroom risotto"],
    "color": ["sage green", "navy blue", "terracotta", "mustard yellow", "pale pink"],
    "thing": ["a used Subaru", "a cargo bike", "a secondhand piano", "a road bike", "an old camper van"],
    "month": ["March", "April", "June", "July", "September", "October", "November", "December"],
    "event": ["half marathon", "pottery class", "charity bake sale", "book club", "open mic night"],
    "instrument": ["ukulele", "cello", "drums", "violin", "bass guitar"],
}
EN_FACTS: list[tuple[str, str, str]] = [
    (
        "We adopted a {animal} last weekend, her name is {pet}.",
        "What is the name of {who}'s {animal}?",
        "pet",
    ),
    (
        "My {rel} {person} is coming to stay with us for a few days.",
        "What is the name of {who}'s {rel}?",
        "person",
    ),
    ("I finally booked the trip, we're flying to {city} in {month}.", "Where is {who} flying to?", "city"),
    ("We spent the whole weekend hiking around {place}.", "Where did {who} go hiking?", "place"),
    ("I got the job! Starting as a {job} at {company} on Monday.", "Which company hired {who}?", "company"),
    ("The new role is {job}, which is kind of a change for me.", "What is {who}'s new job?", "job"),
    ("Lately I've been really into {hobby}, it calms me down.", "What hobby is {who} into lately?", "hobby"),
    ("Honestly my favourite band is still {band}.", "What is {who}'s favourite band?", "band"),
    (
        "I just finished reading {book} and I can't stop thinking about it.",
        "Which book did {who} finish?",
        "book",
    ),
    ("My go-to comfort food is {food}, always has been.", "What is {who}'s comfort food?", "food"),
    (
        "We painted the living room {color} and it looks so cozy.",
        "What colour is {who}'s living room?",
        "color",
    ),
    ("We ended up buying {thing} from a guy down the street.", "What did {who} buy?", "thing"),
    ("I signed up for the {event} next month, wish me luck.", "What did {who} sign up for?", "event"),
    (
        "I've been learning the {instrument} since the spring.",
        "Which instrument is {who} learning?",
        "instrument",
    ),
    (
        "The kids' school is closing early on {date} for the holidays.",
        "When does the school close early?",
        "date",
    ),
    (
        "Grandma turns {age} this year, we're planning a big party.",
        "How old is {who}'s grandma turning?",
        "age",
    ),
    ("I ran {km} kilometres on Sunday, a new record for me.", "How far did {who} run on Sunday?", "km"),
    ("The concert tickets were {price} each, which is crazy.", "How much were the concert tickets?", "price"),
    (
        "Our flat is on the {floor} floor and the lift is broken again.",
        "Which floor is {who}'s flat on?",
        "floor",
    ),
    (
        "I'm going to repaint my bike next week, probably {color}.",
        "What colour will {who} repaint the bike?",
        "color",
    ),
    ("{person} from work told me she is moving to {city}.", "Where is {person} moving?", "city"),
    (
        "Next {month} I'm going to try the {event} with {person}.",
        "Who will {who} do the {event} with?",
        "person",
    ),
]
EN_CHAT = {
    "open": [
        "Hey {other}!",
        "Hi {other}, how's it going?",
        "Morning!",
        "Long time no talk!",
        "Hey you!",
        "Happy Friday {other}!",
        "Ugh, what a week.",
        "Hi hi!",
        "OMG {other}, guess what.",
    ],
    "filler": [
        "Work has been absolutely nonstop.",
        "The weather finally turned nice here.",
        "I slept like twelve hours last night, haha.",
        "My phone has been acting up all week.",
        "I keep meaning to call you but life gets in the way.",
        "Coffee is the only thing keeping me going.",
        "It rained basically the whole weekend.",
        "I've watched way too much TV this week.",
        "The traffic this morning was a nightmare.",
        "I tried meditating again, it lasted 5 minutes.",
        "My neighbours have been doing renovations since 7am every day.",
        "Mondays, am I right?",
        "I burned the toast twice this morning, 100% not a morning person.",
        "Honestly I just need a vacation.",
        "We had friends over and stayed up way too late.",
    ],
    "react": [
        "That's amazing!",
        "Wow, congrats!",
        "No way, that's so cool.",
        "Oh I love that for you.",
        "Haha that sounds about right.",
        "That's so exciting!",
        "Oh no, that's rough.",
        "Aww, that's sweet.",
        "Good for you, seriously.",
        "I'm so happy to hear that!",
        "That sounds lovely.",
        "Ha, classic.",
        "You deserve it!",
        "Oh wow, tell me more!",
    ],
    "ask": [
        "How have you been?",
        "What have you been up to?",
        "How was your weekend?",
        "Any plans for the week?",
        "How's the family?",
        "Did you end up doing anything fun?",
        "How are you feeling about it?",
        "What's new with you?",
        "Are you doing anything special this weekend?",
    ],
    "feel": [
        "I'm really proud of myself, honestly.",
        "It feels like a big step.",
        "I'm a bit nervous but excited.",
        "It made my whole week.",
        "I didn't expect to enjoy it so much.",
        "It's been a lot, but good.",
        "I think it's going to be great.",
        "I'm still processing it, haha.",
    ],
    "close": [
        "Talk soon!",
        "Take care!",
        "Catch you later!",
        "Bye for now!",
        "Love you, talk later.",
        "Gotta run, chat soon!",
        "Speak soon, good luck!",
    ],
}

ZH_POOLS: dict[str, list[str]] = {
    "pet": ["豆豆", "团子", "可乐", "年糕", "花卷", "球球", "小满", "布丁", "煤球", "栗子"],
    "animal": ["小狗", "小猫", "兔子", "鹦鹉", "金毛", "橘猫"],
    "person": ["王芳", "陈磊", "刘洋", "赵敏", "孙浩", "周婷", "吴刚", "郑爽", "何静", "林峰"],
    "rel": ["姐姐", "表哥", "同事", "邻居", "室友", "小姨", "发小"],
    "city": ["杭州", "成都", "厦门", "大理", "青岛", "西安", "昆明", "长沙", "苏州"],
    "place": ["黄山", "九寨沟", "洱海", "千岛湖", "武功山", "莫干山"],
    "company": ["星河科技", "蓝鲸数据", "远山设计", "青禾医疗", "云帆教育"],
    "job": ["产品经理", "护士", "数据分析师", "厨师", "建筑师", "小学老师", "摄影师"],
    "hobby": ["陶艺", "攀岩", "观鸟", "烘焙", "下围棋", "练书法", "跳尊巴"],
    "band": ["五月天", "草东没有派对", "万能青年旅店", "新裤子", "陈绮贞"],
    "book": ["《活着》", "《三体》", "《平凡的世界》", "《长安的荔枝》", "《额尔古纳河右岸》"],
    "food": ["酸菜鱼", "螺蛳粉", "红烧肉", "麻辣烫", "番茄炒蛋", "羊肉泡馍"],
    "color": ["浅绿色", "藏青色", "奶白色", "雾霾蓝", "姜黄色"],
    "thing": ["一辆二手电动车", "一台旧钢琴", "一辆公路车", "一个露营帐篷", "一台咖啡机"],
    "month": ["三月", "四月", "六月", "七月", "九月", "十月", "十一月"],
    "event": ["半程马拉松", "陶艺课", "读书会", "公益跑", "夜跑团"],
    "instrument": ["尤克里里", "大提琴", "架子鼓", "古筝", "小提琴"],
}
ZH_FACTS: list[tuple[str, str, str]] = [
    ("我们上周末领养了一只{animal}，名字叫{pet}。", "{who}的{animal}叫什么名字？", "pet"),
    ("我{rel}{person}这几天要来我家住。", "{who}的{rel}叫什么？", "person"),
    ("机票终于订好了，{month}我们飞{city}。", "{who}要飞去哪里？", "city"),
    ("整个周末我们都在{place}徒步。", "{who}周末去哪里徒步了？", "place"),
    ("我拿到offer了！下周一去{company}当{job}。", "哪家公司录用了{who}？", "company"),
    ("新岗位是{job}，对我来说变化挺大的。", "{who}的新工作是什么？", "job"),
    ("最近迷上了{hobby}，特别解压。", "{who}最近迷上了什么？", "hobby"),
    ("说实话我最喜欢的乐队还是{band}。", "{who}最喜欢的乐队是哪个？", "band"),
    ("刚读完{book}，后劲好大。", "{who}刚读完哪本书？", "book"),
    ("心情不好的时候我就想吃{food}。", "{who}心情不好时想吃什么？", "food"),
    ("客厅刷成了{color}，看起来很温馨。", "{who}的客厅刷成了什么颜色？", "color"),
    ("我们从楼下大叔那里买了{thing}。", "{who}买了什么？", "thing"),
    ("我报名了下个月的{event}，祝我好运。", "{who}报名了什么？", "event"),
    ("开春以来我一直在学{instrument}。", "{who}在学什么乐器？", "instrument"),
    ("孩子学校{date}提前放假。", "学校哪天提前放假？", "date"),
    ("奶奶今年{age}岁了，我们打算好好办一场。", "{who}的奶奶今年多少岁？", "age"),
    ("周日我跑了{km}公里，破了自己的纪录。", "{who}周日跑了多少公里？", "km"),
    ("演唱会门票一张{price}，太贵了。", "演唱会门票多少钱一张？", "price"),
    ("我家住{floor}楼，电梯又坏了。", "{who}家住几楼？", "floor"),
    ("单位的{person}说她要搬去{city}了。", "{person}要搬去哪里？", "city"),
    ("{month}我打算和{person}一起去参加{event}。", "{who}打算和谁一起参加{event}？", "person"),
]
ZH_CHAT = {
    "open": [
        "嗨{other}！",
        "{other}，最近怎么样？",
        "早呀！",
        "好久没聊了！",
        "在吗？",
        "周五快乐！",
        "唉，这周好累。",
        "哈喽哈喽！",
        "{other}你猜怎么着！",
    ],
    "filler": [
        "这周工作忙得脚不沾地。",
        "这边天气终于转晴了。",
        "昨晚睡了快十二个小时，哈哈。",
        "手机这几天老是卡。",
        "一直想给你打电话，结果总是忙忘了。",
        "全靠咖啡续命。",
        "周末几乎下了一整天雨。",
        "这周电视剧刷太多了。",
        "早上堵车堵得怀疑人生。",
        "又试了一次冥想，坚持了5分钟。",
        "邻居装修，每天早上7点就开始电钻。",
        "周一综合症又犯了。",
        "早饭烤面包烤糊了两次，100%不是早起的人。",
        "真的好想放个假。",
        "朋友来家里玩，聊到很晚。",
    ],
    "react": [
        "太棒了！",
        "哇，恭喜恭喜！",
        "不会吧，好酷！",
        "真替你开心。",
        "哈哈，很像你会做的事。",
        "好激动啊！",
        "啊，那挺难的。",
        "好暖心。",
        "真心为你高兴！",
        "听起来好美好。",
        "哈哈，经典。",
        "你值得！",
        "哇，快说说！",
    ],
    "ask": [
        "最近好吗？",
        "最近在忙什么？",
        "周末过得怎么样？",
        "这周有什么安排？",
        "家里人都好吗？",
        "后来去玩了吗？",
        "你感觉怎么样？",
        "有什么新鲜事吗？",
        "这周末有什么特别的安排吗？",
    ],
    "feel": [
        "说实话挺为自己骄傲的。",
        "感觉是迈出了一大步。",
        "有点紧张，但也很期待。",
        "开心了一整周。",
        "没想到会这么喜欢。",
        "挺累的，不过是好事。",
        "我觉得会很顺利的。",
        "到现在还有点不敢相信，哈哈。",
    ],
    "close": [
        "回头聊！",
        "保重！",
        "下次聊！",
        "先这样啦！",
        "爱你，晚点聊。",
        "我先去忙啦！",
        "改天再聊，加油！",
    ],
}
EN_NAMES = ["Maya", "Jonas", "Clara", "Devon", "Aisha", "Theo", "Nora", "Felix", "Lena", "Omar"]
ZH_NAMES = ["小林", "阿杰", "晓雯", "大鹏", "思思", "子豪", "佳琪", "浩然"]


def _slots(rng: random.Random, pools: dict[str, list[str]], zh: bool, used: set[str]) -> dict[str, str]:
    """Values for every slot, preferring ones not used yet in this conversation (so an answer names one
    fact, not five)."""
    values = {}
    for key, pool in pools.items():
        fresh = [v for v in pool if v not in used]
        values[key] = rng.choice(fresh or pool)
    day = date(2023, 1, 1) + timedelta(days=rng.randrange(365))
    values["date"] = f"{day.month}月{day.day}日" if zh else f"{day.strftime('%B')} {day.day}"
    values["age"] = str(rng.randrange(70, 99))
    values["km"] = str(rng.randrange(8, 31))
    values["price"] = f"{rng.randrange(3, 19) * 100}元" if zh else f"${rng.randrange(45, 320)}"
    values["floor"] = (
        str(rng.randrange(5, 33)) if zh else rng.choice(["fourth", "sixth", "ninth", "eleventh"])
    )
    return values


def synthetic_conversation(seed: int, zh: bool, sessions: int = 32) -> Conversation:
    rng = random.Random(seed)
    pools, facts, chat = (ZH_POOLS, ZH_FACTS, ZH_CHAT) if zh else (EN_POOLS, EN_FACTS, EN_CHAT)
    a, b = rng.sample(ZH_NAMES if zh else EN_NAMES, 2)
    conv = Conversation(f"{'zh' if zh else 'en'}_friends_{seed}")
    day = date(2023, 1, 1) + timedelta(days=rng.randrange(200))
    used: set[str] = set()
    for number in range(1, sessions + 1):
        day += timedelta(days=rng.randrange(4, 21))
        stamp = (
            f"{day.year}年{day.month}月{day.day}日" if zh else f"{day.day} {day.strftime('%B')} {day.year}"
        )
        header = f"[对话 {number} · {stamp}]" if zh else f"[Session {number} · {stamp}]"
        planted = rng.sample(facts, 4)
        exchanges = rng.randrange(10, 16)
        fact_at = sorted(rng.sample(range(1, exchanges), 4))
        for i in range(exchanges):
            for role, me, other in (("user", a, b), ("assistant", b, a)):
                parts: list[str] = []
                if i == 0:
                    parts.append(rng.choice(chat["open"] if role == "user" else chat["react"]))
                    parts.append(rng.choice(chat["ask"]))
                elif i in fact_at and (role == "user") == (fact_at.index(i) % 2 == 0):
                    statement, question, slot = planted[fact_at.index(i)]
                    values = _slots(rng, pools, zh, used)
                    values.update(who=me, other=other)
                    if values[slot] in used:  # stated again, not asked: it would name two facts
                        slot = ""
                    used.add(values[slot] if slot else "")
                    parts += [rng.choice(chat["react"])] if rng.random() < 0.5 else []
                    parts += [statement.format(**values), rng.choice(chat["feel"])]
                    q = question.format(**values)
                    # A fact stated again later is an update: the question's answer is the newest one.
                    conv.qa = [x for x in conv.qa if x["question"] != q]
                    if slot:
                        conv.qa.append({"question": q, "answer": values[slot]})
                elif i == exchanges - 1:
                    parts += [rng.choice(chat["react"]), rng.choice(chat["close"])]
                else:
                    parts += [rng.choice(chat["react"]), rng.choice(chat["filler"])]
                    parts += rng.sample(chat["filler"], rng.randrange(0, 3))
                    if rng.random() < 0.5:
                        parts.append(rng.choice(chat["ask"]))
                text = ("" if zh else " ").join(p.format(other=other) for p in parts)
                if i == 0 and role == "user":
                    text = f"{header}\n{text}"
                conv.say(role, me, text)
    return conv


# --- MADial ---------------------------------------------------------------------------------------

_EN_STOP_WORDS = (
    "a an the and or to of in at on for with from by his her their my our your its was were is are be been "
    "felt feel very so really quite that this it he she they i me we us after before when while because as "
    "up out about into over had has have did do got get went go said made make first also then"
)
_EN_STOP = set(_EN_STOP_WORDS.split())


_ZH_STOP = {
    "感到",
    "开心",
    "非常",
    "觉得",
    "高兴",
    "十分",
    "特别",
    "感觉",
    "愉快",
    "难过",
    "伤心",
    "兴奋",
    "一起",
}


def _first_person(event: str, user: str, zh: bool) -> str:
    if zh:
        return event.replace(f"{user}的", "我的").replace(user, "我")
    text = re.sub(rf"\b{re.escape(user)}'s\b|\b{re.escape(user)}’s\b", "my", event)
    text = re.sub(rf"^{re.escape(user)}\b", "I", text)
    return re.sub(rf"\b{re.escape(user)}\b", "I", text)


def _answer_span(event: str, user: str, zh: bool, rng: random.Random) -> str | None:
    """A content span of the event: the longest run of 2-4 non-stopwords (English) or a 2-8 character
    chunk between function characters (Chinese); ``None`` when there is none."""
    if zh:
        import jieba.posseg  # the bench extra; only this set needs it

        runs = [""]
        for token in jieba.posseg.cut(event.replace(user, "，")):
            content = token.flag[0] not in "pruydcxyeo" and token.word not in _ZH_STOP
            runs[-1] += token.word if content else ""
            if not content:
                runs.append("")
        good = [r[:8] for r in runs if len(r) >= 2]
        return max(good, key=len) if good else None
    words = re.findall(r"[\w’'-]+", event)
    runs: list[list[str]] = [[]]
    for w in words:
        if w.lower() in _EN_STOP or w == user or w.startswith(user):
            runs.append([])
        else:
            runs[-1].append(w)
    good = [r[:4] for r in runs if len(r) >= 2]
    if not good:
        return None
    return " ".join(max(good, key=len))


def _dialogue_lines(raw: list[str], user: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for line in raw:
        m = re.match(r'^<(?P<who>[^>]+)>:\s*"?(?P<text>.*?)"?\s*$', line.strip())
        if m and m["who"] not in ("BOD", "EOD"):
            out.append(("user" if m["who"] != "Assistant" else "assistant", m["text"]))
    return out


def madial_conversations(lang: str, draw: int = 0) -> list[Conversation]:
    zh = lang == "zh"
    prefix = MADIAL / ("ch/MADial-Bench-zh" if zh else "en/MADial-Bench-en")
    dialogues = [
        json.loads(x) for x in (prefix.parent / f"{prefix.name}-dialogue.json").read_text().splitlines()
    ]
    memories: dict[str, dict[str, Any]] = {}
    for line in (prefix.parent / f"{prefix.name}-memory.json").read_text().splitlines():
        memories.update(json.loads(line))
    out = []
    for user_id in sorted({d["user-id"] for d in dialogues}):
        rng = random.Random(1000 + user_id + 1000 * draw)
        mine = [d for d in dialogues if d["user-id"] == user_id]
        user = next(m["who"] for m in re.finditer(r"<(?P<who>[^>]+)>", mine[0]["dialogue"][1]))
        mems = sorted(
            (m for m in memories.values() if user in m["event"]), key=lambda m: (m["time"], m["event"])
        )
        conv = Conversation(f"{lang}_madial_user{user_id}")
        for number, memory in enumerate(mems, start=1):
            told = _first_person(memory["event"], user, zh)
            lines = _dialogue_lines(mine[(number - 1 + draw) % len(mine)]["dialogue"], user)
            header = f"[对话 {number} · {memory['time']}]" if zh else f"[Session {number} · {memory['time']}]"
            at = rng.randrange(0, max(1, len(lines) // 2)) * 2  # before a user line
            said = "对了，跟你说件事：" if zh else "Oh, something I wanted to tell you: "
            ack = "听起来真不错，谢谢你告诉我！" if zh else "That sounds wonderful, thanks for telling me!"
            lines[at:at] = [("user", said + told), ("assistant", ack)]
            for i, (role, text) in enumerate(lines):
                content = f"{header}\n{text}" if i == 0 else text
                conv.messages.append({"role": role, "content": content})
            span = _answer_span(memory["event"], user, zh, rng)
            what = "什么" if zh else "what"
            if span and span not in memory["event"][: len(user) + 1]:
                q = (
                    f"{memory['time']}那天{user}经历了{what}？"
                    if zh
                    else f"What happened to {user} on {memory['time']}?"
                )
                conv.qa.append({"question": q, "answer": span})
            if rng.random() < 0.3:
                q = (
                    f"{user}是哪天{told[:12]}？"
                    if zh
                    else f"When did this happen to {user}: {memory['event'][:60]}?"
                )
                conv.qa.append({"question": q, "answer": memory["time"]})
        out.append(conv)
    return out


DRAWS = ((0, ""), (1, "-heldout"), (2, "-heldout2"), (3, "-heldout3"), (4, "-heldout4"))


def build_all(out: Path) -> None:
    """Every set, every draw, into ``out/<set>/`` (MADial's only when its data is at :data:`MADIAL`)."""
    for draw, suffix in DRAWS:
        for seed in range(11 + 20 * draw, 14 + 20 * draw):
            synthetic_conversation(seed, zh=False).write(out / f"synthetic{suffix}")
            synthetic_conversation(seed + 10, zh=True).write(out / f"synthetic{suffix}")
        if MADIAL.exists():
            for lang in ("en", "zh"):
                for conv in madial_conversations(lang, draw):
                    conv.write(out / f"madial{suffix}")


def main() -> None:
    from evals.datasets import compaction_sets

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if out is not None:
        build_all(out)
    else:
        out = compaction_sets()
    for path in sorted(out.glob("*/*.qa.jsonl")):
        n = sum(1 for _ in path.open())
        print(f"{path.relative_to(out)}: {n} questions")


if __name__ == "__main__":
    main()
