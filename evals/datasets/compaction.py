"""Dev sets for the compaction evals: long multi-session conversations + questions whose answers are
verbatim in the conversation. Written to ``OUT/<set>/<name>.jsonl`` (an OpenAI-format transcript) and
``<name>.qa.jsonl`` (``{"question": ..., "answer": ...}`` per line); :func:`evals.datasets.compaction_sets`
builds them on first use into ``evals/.cache/`` (nothing is committed).

Two sets, both deterministic:

* ``synthetic`` — **synthetic**, generated here from templates with a seed: two friends chat over ~25
  dated sessions (English and Chinese conversations); each session plants a few facts of the kinds people
  later ask about (names, places, dates, numbers, preferences, plans, plain events without cue words,
  lower-case details) among chit-chat distractors that also carry names, numbers and exclamations.
* ``madial`` — built from the public MADial-Bench data (MIT, :data:`MADIAL`), English and Chinese: per
  user, one session per memory (dated by the memory's time) in which the user tells the memory's event in
  the first person, as a person would ("My dad and I went swimming", with one of a few lead-ins or none),
  around one of the user's real dialogues with the assistant; the questions ask for the event's date and a
  content span of the event. Bart's conversations (user-id 1) only: the **dev** set, tuned on.

``madial-heldout`` is the same construction for MADial's other user, Lisa (user-id 2): **held out**, no
user, memory, dialogue or answer in common with ``madial`` (:data:`MADIAL_SETS`). The constants in the
tree were chosen before this split, when every MADial draw held both users; from the split on, nothing is
to be tuned on it. ``synthetic-redraw1`` … ``synthetic-redraw4`` are the synthetic generator drawn again
with other seeds: fresh conversations from the same templates and pools (most of their answers are the
tuned draw's too), so they are dev sets as well, not held-out ones.

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


# How a person brings up news in the flow of a chat: most often with no lead-in at all, else with one
# of the openers MADial-Bench's own users and LoCoMo's speakers use ("Hey, did you know?", "You know
# what?", "By the way", 对了, 你知道吗), drawn by the rng: never one fixed phrase a table could learn.
EN_LEAD_INS = (
    "",
    "",
    "",
    "",
    "",
    "Hey, did you know? ",
    "You know what? ",
    "Guess what? ",
    "By the way, ",
    "Oh, ",
)
ZH_LEAD_INS = ("", "", "", "", "", "对了，", "你知道吗？", "嘿，你知道吗？", "对了，你知道吗？")
EN_ACKS = (
    "Thanks for telling me about it.",
    "I'm glad you shared that with me.",
    "I see, thank you for telling me.",
    "That's quite a story, thanks for sharing.",
)
ZH_ACKS = ("谢谢你告诉我。", "很高兴你愿意跟我分享。", "原来是这样，谢谢你跟我说。", "嗯嗯，谢谢你的分享。")

# After "I": the first person of the third-person verbs MADial's events use ("Lisa is playing ... and
# feels very happy" -> "I am playing ... and feel very happy").
_EN_FIRST = {
    "is": "am",
    "has": "have",
    "does": "do",
    "feels": "feel",
    "finds": "find",
    "reads": "read",
    "discusses": "discuss",
}
# What the user did with others, told by the user: "they" are "we" ("My dad and I ... They took a photo").
_EN_WE = {"they": "we", "They": "We", "their": "our", "Their": "Our", "them": "us"}
# "her" before these is the object ("made her feel", "told her that"), elsewhere the possessive.
_EN_HER_OBJECT = (
    r"(?=\s+(?:very|feel\w*|felt|that|to|a|an|the|so|super|quite|extremely|somewhat)\b|\s*[^\w\s]|\s*$)"
)
# A name after these words is still the sentence's subject ("Eventually, Bart took", "and Bart was").
_EN_SUBJECT_AFTER = {"and", "but", "so", "as", "when", "while", "because", "that", "then", "until", "where"}
# The verbs that end a shared subject "Bart and his cousin Adam | went ..." in MADial's events.
_EN_VERB = r"(?:\w+ed|went|had|were|are|was|made|spent|play|took|ran|saw|did)\b"


def first_person(event: str, user: str, zh: bool, rng: random.Random | None = None, he: bool = True) -> str:
    """The event as the user would tell it: "Bart and his dad went swimming, which made him happy." ->
    "My dad and I went swimming, which made me happy." (or "Me and my dad went ...", drawn by ``rng``);
    "Bart和他的爸爸去游泳" -> "我和我的爸爸去游泳". Pronouns of the user's own gender (``he``: he / his / him,
    else she / her) are taken for the user's (in MADial's events they almost always are)."""
    if zh:
        text = event.replace(f"{user}的", "我的").replace(user, "我")
        return re.sub(r"(?<!其)[他她](?![们人])", "我", text)
    u = re.escape(user)
    subject, obj, own, self_ = (
        (r"he", r"him", r"his", r"himself") if he else (r"she", "her", "her", r"herself")
    )

    def shared(m: re.Match[str]) -> str:  # "Bart and his cousin Adam went" -> "My cousin Adam and I went"
        other = m["other"]
        if rng is not None and rng.random() < 1 / 3:
            return f"me and {other}" if m.start() else f"Me and {other}"
        return f"{other[0].upper() if not m.start() else other[0]}{other[1:]} and I"

    text = re.sub(rf"\b{u}(?:'s|’s)", "my", event)
    text = re.sub(
        rf"(?:(?<=^)|(?<=, )){u} and (?P<other>(?:his|her) [^.;]*?|[A-Z]\w+)(?= {_EN_VERB})", shared, text
    )

    def name(m: re.Match[str]) -> str:
        before = text[: m.start()].rstrip()
        word = re.search(r"(\w+)$", before)
        if not before or before[-1] in ".,;:!?" or (word and word[1].lower() in _EN_SUBJECT_AFTER):
            return "I"
        return "me"

    text = re.sub(rf"\b{u}\b", name, text)
    if he:
        text = re.sub(r"\bhis\b", "my", text)
        text = re.sub(r"\bHis\b", "My", text)
    else:
        text = re.sub(rf"\b{obj}\b{_EN_HER_OBJECT}", "me", text)
        text = re.sub(rf"\b{own}\b", "my", text)
        text = re.sub(r"\bHer\b", "My", text)
    text = re.sub(rf"\b{self_}\b", "myself", text)
    text = re.sub(rf"\b{obj}\b", "me", text)
    text = re.sub(rf"\b{subject}\b", "I", text)
    text = re.sub(rf"\b{subject.capitalize()}\b", "I", text)
    text = re.sub(r"^my\b", "My", text)
    verbs = "|".join(_EN_FIRST)
    text = re.sub(rf"\bI ((?:\w+ly )?)({verbs})\b", lambda m: f"I {m[1]}{_EN_FIRST[m[2]]}", text)
    text = re.sub(r"\band (feels|finds|discusses)\b", lambda m: f"and {_EN_FIRST[m[1]]}", text)
    if re.search(r"\band I\b|^Me and|, me and|\bwith (?:me|my)\b|\btook me\b", text):
        text = re.sub(r"\b(?:[Tt]hey|[Tt]heir)\b|(?<!with )\bthem\b", lambda m: _EN_WE[m[0]], text)
    return text


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
    words = re.findall(r"[\w’'-]+|[^\w\s’'-]", event)  # a mark ends a run: the span is said verbatim
    runs: list[list[str]] = [[]]
    for w in words:
        if not re.match(r"[\w’'-]", w) or w.lower() in _EN_STOP or w == user or w.startswith(user):
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


def madial_conversations(lang: str, draw: int = 0, users: tuple[int, ...] = (1, 2)) -> list[Conversation]:
    """One conversation per MADial user of ``users`` (``user-id``s), in ``lang``; ``draw`` picks which of
    the user's dialogues holds each memory and where."""
    zh = lang == "zh"
    prefix = MADIAL / ("ch/MADial-Bench-zh" if zh else "en/MADial-Bench-en")
    dialogues = [
        json.loads(x) for x in (prefix.parent / f"{prefix.name}-dialogue.json").read_text().splitlines()
    ]
    memories: dict[str, dict[str, Any]] = {}
    for line in (prefix.parent / f"{prefix.name}-memory.json").read_text().splitlines():
        memories.update(json.loads(line))
    out = []
    for user_id in sorted({d["user-id"] for d in dialogues} & set(users)):
        rng = random.Random(1000 + user_id + 1000 * draw)
        mine = [d for d in dialogues if d["user-id"] == user_id]
        user = next(m["who"] for m in re.finditer(r"<(?P<who>[^>]+)>", mine[0]["dialogue"][1]))
        mems = sorted(
            (m for m in memories.values() if user in m["event"]), key=lambda m: (m["time"], m["event"])
        )
        conv = Conversation(f"{lang}_madial_user{user_id}")
        said_of = " ".join(m["event"] for m in mems)  # the user's pronouns, as the events use them
        he = len(re.findall(r"\b(?:he|his|him)\b", said_of, re.I)) >= len(
            re.findall(r"\b(?:she|her)\b", said_of, re.I)
        )
        for number, memory in enumerate(mems, start=1):
            told = first_person(memory["event"], user, zh, rng, he)
            lines = _dialogue_lines(mine[(number - 1 + draw) % len(mine)]["dialogue"], user)
            header = f"[对话 {number} · {memory['time']}]" if zh else f"[Session {number} · {memory['time']}]"
            at = rng.randrange(0, max(1, len(lines) // 2)) * 2  # before a user line
            said = rng.choice(ZH_LEAD_INS if zh else EN_LEAD_INS)
            if said.endswith(", ") and not re.match(r"(?:I|My|Me|Dad|Mom)\b", told):
                told = told[0].lower() + told[1:]  # "By the way, over the weekend I ..."
            ack = rng.choice(ZH_ACKS if zh else EN_ACKS)
            lines[at:at] = [("user", said + told), ("assistant", ack)]
            for i, (role, text) in enumerate(lines):
                content = f"{header}\n{text}" if i == 0 else text
                conv.messages.append({"role": role, "content": content})
            span = _answer_span(told, user, zh, rng)  # words the user said
            what = "什么" if zh else "what"
            if span and span not in memory["event"][: len(user) + 1]:
                q = (
                    f"{memory['time']}那天{user}经历了{what}？"
                    if zh
                    else f"What happened to {user} on {memory['time']}?"
                )
                conv.qa.append({"question": q, "answer": span, "told": told})
            if rng.random() < 0.3:
                q = (
                    f"{user}是哪天{memory['event'].removeprefix(user)[:12]}？"
                    if zh
                    else f"When did this happen to {user}: {memory['event'][:60]}?"
                )
                conv.qa.append({"question": q, "answer": memory["time"], "told": told})
        out.append(conv)
    return out


# The synthetic sets: the tuned draw and four redraws (other seeds, same templates and pools: 57-65% of a
# redraw's answers are answers of the tuned draw too, so they are dev sets, not held-out ones).
DRAWS = ((0, ""), (1, "-redraw1"), (2, "-redraw2"), (3, "-redraw3"), (4, "-redraw4"))
# MADial-Bench has two users, Bart (user-id 1) and Lisa (2), the same in English and Chinese. The dev set
# is Bart's conversations, the held-out set Lisa's: no user, memory or dialogue in both. (Until this split
# every draw held both users' memories with the same answers, told in other dialogues.)
MADIAL_SETS = (("madial", (1,)), ("madial-heldout", (2,)))


def build_all(out: Path) -> None:
    """Every set, every draw, into ``out/<set>/`` (MADial's only when its data is at :data:`MADIAL`)."""
    for draw, suffix in DRAWS:
        for seed in range(11 + 20 * draw, 14 + 20 * draw):
            synthetic_conversation(seed, zh=False).write(out / f"synthetic{suffix}")
            synthetic_conversation(seed + 10, zh=True).write(out / f"synthetic{suffix}")
    if MADIAL.exists():
        dev: set[str] = set()  # the answers of the sets before: a later set asks none of them
        for name, users in MADIAL_SETS:
            convs = [c for lang in ("en", "zh") for c in madial_conversations(lang, users=users)]
            for conv in convs:
                conv.qa = [q for q in conv.qa if q["answer"].lower() not in dev]
                conv.write(out / name)
            dev |= {q["answer"].lower() for c in convs for q in c.qa}


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
