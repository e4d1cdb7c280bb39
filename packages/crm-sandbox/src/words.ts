// Fixed vocabularies: rows pick from them by seeded draws, so their order is part of the dataset.

export const FIRST_NAMES = [
  "Ada",
  "Ben",
  "Carla",
  "Dmitri",
  "Elena",
  "Farid",
  "Greta",
  "Hiro",
  "Ines",
  "Jonas",
  "Kalani",
  "Lena",
  "Mateo",
  "Nadia",
  "Olu",
  "Priya",
  "Quentin",
  "Rosa",
  "Sven",
  "Tariq",
  "Uma",
  "Viktor",
  "Wen",
  "Ximena",
  "Yusuf",
  "Zoe",
  "Amara",
  "Bruno",
  "Chiara",
  "Diego",
  "Esther",
  "Felix",
  "Gustav",
  "Hana",
  "Ivan",
  "Jana",
] as const;

export const LAST_NAMES = [
  "Abebe",
  "Bauer",
  "Costa",
  "Dubois",
  "Eriksen",
  "Fischer",
  "Garcia",
  "Hoffmann",
  "Ivanova",
  "Jensen",
  "Kowalski",
  "Lindqvist",
  "Moreau",
  "Nakamura",
  "Okafor",
  "Petrov",
  "Quispe",
  "Rossi",
  "Schmidt",
  "Tanaka",
  "Urban",
  "Varga",
  "Weber",
  "Xu",
  "Yilmaz",
  "Zimmermann",
  "Almeida",
  "Berg",
  "Novak",
  "Silva",
] as const;

export const ORG_WORDS = [
  "Acme",
  "Blue",
  "Cedar",
  "Delta",
  "Ember",
  "Fjord",
  "Granite",
  "Harbor",
  "Iris",
  "Juniper",
  "Kestrel",
  "Lumen",
  "Maple",
  "Nimbus",
  "Orbit",
  "Pioneer",
  "Quartz",
  "River",
  "Summit",
  "Tundra",
  "Vertex",
  "Willow",
] as const;

export const ORG_NOUNS = [
  "Logistics",
  "Foods",
  "Robotics",
  "Analytics",
  "Textiles",
  "Energy",
  "Health",
  "Media",
  "Motors",
  "Labs",
  "Partners",
  "Systems",
  "Supply",
  "Design",
  "Consulting",
  "Bakery",
  "Software",
  "Freight",
] as const;

export const ORG_SUFFIXES = ["GmbH", "Ltd", "Inc.", "AG", "S.A.", "B.V.", "Oy", "LLC", "SAS", ""] as const;

export const CITIES = [
  "Berlin",
  "Tallinn",
  "Lisbon",
  "Dublin",
  "Austin",
  "Toronto",
  "Madrid",
  "Warsaw",
  "Oslo",
  "Lyon",
  "Porto",
] as const;

export const STREETS = [
  "Main St",
  "Harbour Rd",
  "Lindenstraße",
  "Rue de la Paix",
  "Calle Mayor",
  "Ringvej",
] as const;

export const INDUSTRIES = [
  "Retail",
  "Manufacturing",
  "Software",
  "Logistics",
  "Healthcare",
  "Finance",
] as const;

export const PRODUCTS = [
  "annual licence",
  "pilot",
  "renewal",
  "onboarding package",
  "support plan",
  "hardware order",
  "expansion",
] as const;

export const ACTIVITY_TYPES = ["call", "meeting", "email", "task"] as const;

export const SUBJECT_TOPICS = [
  "pricing",
  "contract",
  "kick-off",
  "follow-up",
  "demo",
  "renewal",
  "technical review",
  "invoice",
] as const;

export const USERS = [
  { id: 1, name: "Avery Owner", email: "avery.owner@drover-sandbox.test" },
  { id: 2, name: "Blake Seller", email: "blake.seller@drover-sandbox.test" },
  { id: 3, name: "Casey Closer", email: "casey.closer@drover-sandbox.test" },
  { id: 4, name: "Devon Hunter", email: "devon.hunter@drover-sandbox.test" },
] as const;

export type User = (typeof USERS)[number];

/** The user the API token belongs to: what v1 activities show when `user_id` is absent. */
export const TOKEN_OWNER_ID = 1;
