# ruff: noqa: E501  (dialogue texts)
"""Forks with the real detectors: switches in other languages, two switches between two
evaluations, and the model deciding (validated) where a new subject starts."""

import pytest

from memory.actions.evaluation import evaluate_session
from memory.drift.detectors import Turn, get_detector
from memory.models import Message, Topic
from tests.evaluation_helpers import converse, summary_answer

# A leaking kitchen tap, then (no cue phrase) how to get up early: product-tune-30.
RUSSIAN = [
    ("user", "Кстати, у меня на кухне течёт смеситель. Можно починить самому?"),
    (
        "assistant",
        "Чаще всего смеситель течёт из-за изношенной прокладки или картриджа, и это вполне можно починить самостоятельно. Перекройте воду под раковиной, снимите ручку и достаньте картридж. Возьмите его с собой в магазин, чтобы купить точно такой же.",
    ),
    ("user", "Какие инструменты понадобятся?"),
    (
        "assistant",
        "Обычно хватает разводного ключа, шестигранника и отвёртки. Подстелите полотенце в раковину, чтобы мелкие детали не упали в слив. Силиконовая смазка для уплотнителей тоже пригодится.",
    ),
    ("user", "А если вода всё равно капает после замены?"),
    (
        "assistant",
        "Проверьте, правильно ли сел картридж и затянута ли гайка. Если капает из-под корпуса, изношено уплотнительное кольцо на изливе. Если ничего не помогает, дешевле заменить смеситель целиком, чем бесконечно его ремонтировать.",
    ),
    ("user", "Как научиться рано вставать, если я сова?"),
    (
        "assistant",
        "Сдвигайте время подъёма постепенно, на пятнадцать минут каждые несколько дней, и вставайте в одно и то же время даже в выходные. Утром сразу откройте шторы или выйдите на улицу: яркий свет быстрее всего перестраивает внутренние часы. Вечером приглушите свет и отложите телефон за час до сна.",
    ),
    ("user", "Помогает ли мелатонин?"),
    (
        "assistant",
        "Небольшая доза мелатонина за несколько часов до желаемого времени сна может помочь сдвинуть ритм, но это не снотворное. Лучше обсудить его с врачом, особенно если принимаете другие лекарства. Свет утром и режим работают сильнее.",
    ),
]

# A slow PC's memory, then (no cue phrase) a dog that barks on walks: product-tune-34.
JAPANESE = [
    ("user", "ところで、最近パソコンの動作がすごく遅いのですが、何を確認すればいいですか？"),
    (
        "assistant",
        "まずタスクマネージャーを開いて、CPUやメモリ、ディスクの使用率が高いプロセスを確認してください。スタートアップに登録されている不要なアプリを無効にするだけで、起動がかなり速くなることがあります。ストレージの空き容量が一割を切っている場合も遅くなります。",
    ),
    ("user", "メモリが八ギガしかないのですが、増設した方がいいですか？"),
    (
        "assistant",
        "ブラウザでタブをたくさん開くなら、十六ギガに増設すると体感が大きく変わります。ノートパソコンの場合、メモリがマザーボードに直付けで増設できない機種もあるので、型番で確認してください。増設できるなら費用は一万円前後です。",
    ),
    ("user", "増設は自分でもできますか？"),
    (
        "assistant",
        "デスクトップや裏蓋を開けられるノートなら、ドライバー一本で自分でも交換できます。作業前に電源を切り、静電気を逃がしてから触ってください。対応する規格のメモリを選ぶことが一番大切です。",
    ),
    ("user", "犬の散歩中に他の犬に吠えてしまうのですが、どうしつければいいですか？"),
    (
        "assistant",
        "吠える前の距離、つまり犬が相手に気づいても落ち着いていられる距離から練習を始めます。相手の犬を見て静かにしていられたら、すぐにおやつで褒めてください。少しずつ距離を縮めていくと、他の犬は良いことの合図だと覚えていきます。",
    ),
    ("user", "リードを引っ張って止めるのはだめですか？"),
    (
        "assistant",
        "強く引っ張ると首に負担がかかり、かえって興奮や不安が強くなることがあります。吠えそうになったら向きを変えてその場を離れる方が効果的です。ハーネスに変えると引っ張りの負担も減ります。",
    ),
]


GARDEN = [
    ("user", "I want to plan a vegetable garden on my balcony this spring."),
    (
        "assistant",
        "Tomatoes, basil, lettuce and radishes do well in balcony pots. Check how many hours "
        "of sun the balcony gets: tomatoes need six or more, lettuce and herbs cope with less. "
        "Use large pots with drainage holes and a peat-free vegetable compost.",
    ),
    ("user", "How deep should the tomato pots be?"),
    (
        "assistant",
        "Give each tomato plant a pot of at least 30 cm depth and about 20 litres of compost. "
        "Deeper pots hold more water, so the plants dry out less on hot balcony days. Put a "
        "layer of clay pebbles at the bottom so the roots never stand in water.",
    ),
    ("user", "And how often should I water the basil and the tomatoes?"),
    (
        "assistant",
        "Water the tomatoes and the basil when the top centimetre of compost is dry, which in "
        "summer can mean every morning. Water the soil, not the leaves, to keep blight away "
        "from the tomatoes. Basil hates standing in wet compost, so let its pot drain.",
    ),
    ("user", "Should the tomato plants get a stake or a cage on a windy balcony?"),
    (
        "assistant",
        "On a windy balcony a sturdy stake tied to the railing, or a tomato cage, keeps the "
        "plants upright. Tie the stems loosely with soft twine as they grow. Bush tomato "
        "varieties need less support than tall cordon tomatoes.",
    ),
    ("user", "Which tomato varieties stay compact enough for balcony pots?"),
    (
        "assistant",
        "Compact bush tomatoes such as Tumbling Tom, Balconi Red or Maskotka stay small in "
        "balcony pots and still crop well. Cherry tomato varieties ripen faster than large "
        "beefsteak tomatoes, which suits a short balcony season.",
    ),
]
TWO_SUBJECTS = [
    ("user", "Different question: my laptop battery drains overnight while it sleeps."),
    (
        "assistant",
        "Something is probably waking the laptop. On Windows, powercfg /lastwake and the "
        "battery report show what woke it and when; on a Mac, pmset -g log does the same. "
        "Network adapters, USB mice and scheduled updates are the usual culprits.",
    ),
    ("user", "The wake logs show the laptop network adapter waking it every hour."),
    (
        "assistant",
        "Then turn off wake-on-LAN: in Device Manager open the network adapter's power "
        "management tab and untick 'Allow this device to wake the computer'. Some laptops "
        "also have a wake-on-LAN switch in the BIOS that should be disabled as well.",
    ),
    ("user", "By the way, can you recommend a good sourdough bread recipe for beginners?"),
    (
        "assistant",
        "A forgiving beginner loaf: 500 g bread flour, 350 g water, 100 g active starter and "
        "10 g salt. Mix, rest an hour, fold the dough four times over two hours, shape it, "
        "then proof it in a floured banneton in the fridge overnight before baking.",
    ),
    ("user", "How do I know when the dough has proofed enough?"),
    (
        "assistant",
        "Press the dough gently with a floured finger: if the dent springs back slowly and "
        "not completely, the loaf is ready to bake. If it springs back at once it needs more "
        "time; if the dent stays, the dough has over-proofed and will spread in the oven.",
    ),
    ("user", "What oven temperature gives the loaf a good crust?"),
    (
        "assistant",
        "Bake the loaf at 250 degrees in a preheated cast-iron pot with the lid on for 20 "
        "minutes, so the steam lets it rise, then at 230 degrees without the lid for another "
        "20 to 25 minutes until the crust is deep brown and the base sounds hollow.",
    ),
]


def user_texts(topic):
    return list(
        topic.messages.filter(role="user").order_by("seq").values_list("content", flat=True)
    )


@pytest.mark.parametrize(
    "lines", [pytest.param(RUSSIAN, id="russian"), pytest.param(JAPANESE, id="japanese")]
)
def test_a_switch_in_another_language_forks_at_the_new_subject(session, lines):
    """The embedded default (offline model, model-free detector) forks a switch with no
    cue phrase in Russian and in Japanese: Snowball stems and Han bigrams."""
    prior = session.active_topic()
    converse(session, lines)

    outcome = evaluate_session(session_id=session.pk, reason="test")

    assert outcome.action == "forked"
    new = Topic.objects.get(pk=outcome.new_topic_id)
    assert user_texts(new) == [text for role, text in lines[6:] if role == "user"]
    assert user_texts(prior) == [text for role, text in lines[:6] if role == "user"]


def test_two_subjects_between_two_evaluations_fork_twice_within_the_scan_back(session, settings):
    settings.DRIFT_SCAN_BACK = 10
    garden = session.active_topic()
    converse(session, GARDEN)
    assert evaluate_session(session_id=session.pk, reason="interval").action == "refreshed"
    converse(session, TWO_SUBJECTS)  # seq 11-20: laptop from 11, sourdough from 15

    outcome = evaluate_session(session_id=session.pk, reason="interval")

    assert outcome.action == "forked"
    topics = list(Topic.objects.filter(session=session).order_by("pk"))
    assert [t.pk for t in topics][0] == garden.pk and len(topics) == 3
    seqs = [list(t.messages.order_by("seq").values_list("seq", flat=True)) for t in topics]
    assert seqs == [list(range(1, 11)), list(range(11, 15)), list(range(15, 21))]
    assert topics[1].forked_from_id == garden.pk and topics[2].forked_from_id == topics[1].pk
    assert [t.is_active for t in topics] == [False, False, True]
    moved = Message.objects.filter(session=session).exclude(topic=garden)
    assert min(moved.values_list("seq", flat=True)) > 20 - settings.DRIFT_SCAN_BACK


def test_the_model_decides_a_switch_the_lexical_pass_does_not_see(fake_openai, session, settings):
    settings.DRIFT_DETECTOR = "llm"  # the model alone: an option, never the default
    prior = session.active_topic()
    Topic.objects.filter(pk=prior.pk).update(title="Balcony veg", summary="Pots, tomatoes.")
    converse(session, GARDEN)
    turns = [Turn(role, text) for role, text in GARDEN]
    assert not get_detector("lexical").detect(turns, scan_back=10).drifted
    fake_openai.reply_json({"drifted": True, "start": 6})  # the model's call
    fake_openai.reply_json(summary_answer(title="Balcony garden"))  # the prior's summary
    fake_openai.reply_json({"drifted": False, "start": None})  # the new topic, judged again

    outcome = evaluate_session(session_id=session.pk, reason="test")

    assert outcome.action == "forked"
    new = Topic.objects.get(pk=outcome.new_topic_id)
    assert list(new.messages.order_by("seq").values_list("seq", flat=True)) == [7, 8, 9, 10]
    first_call = fake_openai.requests[0]["messages"]
    assert "numbered 1" in first_call[0]["content"]
    assert "Balcony veg — Pots, tomatoes." in first_call[0]["content"]
    assert "[6] user: Should the tomato plants" in first_call[1]["content"]
    prior.refresh_from_db()
    assert prior.title == "Balcony garden" and not prior.is_active


def test_auto_never_lets_the_model_fork_alone(fake_openai, session, settings):
    """A small model sees switches that are not there (the local 1.5B model forked a
    one-subject talk 4 times): under ``auto`` its fork counts only at a turn the
    model-free detector finds at least borderline, and staking tomatoes is a follow-up."""
    settings.DRIFT_DETECTOR = "auto"
    converse(session, GARDEN)
    fake_openai.reply_json({"drifted": True, "start": 6})  # the model's call
    fake_openai.reply_json(summary_answer(title="Balcony garden"))

    outcome = evaluate_session(session_id=session.pk, reason="test")

    assert outcome.action == "refreshed"
    assert outcome.detail == "model's fork not borne out by the text"
    assert Topic.objects.filter(session=session).count() == 1


def test_auto_forks_a_clear_switch_without_asking_the_model(fake_openai, session, settings):
    settings.DRIFT_DETECTOR = "auto"
    converse(session, RUSSIAN)  # a real switch the model-free detector forks
    fake_openai.reply_json(summary_answer(title="Кран"))  # the prior's summary, if asked
    fake_openai.reply_json(summary_answer(title="Кран"))

    outcome = evaluate_session(session_id=session.pk, reason="test")

    assert outcome.action == "forked"
    assert outcome.detail.startswith("lexical shift at turn 6")  # the text's, not the model's


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param({"drifted": True, "start": 0}, id="start-0"),
        pytest.param({"drifted": True, "start": 99}, id="start-past-end"),
        pytest.param({"drifted": "yes", "start": 6}, id="not-a-boolean"),
        pytest.param({"drifted": True}, id="no-start"),
    ],
)
def test_an_unusable_model_answer_forks_nothing(fake_openai, session, settings, answer):
    settings.DRIFT_DETECTOR = "llm"
    converse(session, RUSSIAN)  # a real switch the model-free detector would fork
    fake_openai.reply_json(answer)
    fake_openai.reply_json(summary_answer(title="Кран"))

    outcome = evaluate_session(session_id=session.pk, reason="test")

    assert outcome.action == "refreshed"
    assert Topic.objects.filter(session=session).count() == 1
    assert outcome.detail == "model answer unusable; no fork"


def test_a_failed_model_call_forks_nothing(fake_openai, session, settings):
    settings.DRIFT_DETECTOR = "llm"
    converse(session, RUSSIAN)
    fake_openai.fail(500)
    fake_openai.reply_json(summary_answer(title="Кран"))

    outcome = evaluate_session(session_id=session.pk, reason="test")

    assert outcome.action == "refreshed"
    assert Topic.objects.filter(session=session).count() == 1
